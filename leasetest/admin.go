package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// testAdmin is the Admin area: the operators' calls.
func testAdmin(t *testing.T, s *Suite) {
	runCases(t, s, []testCase{
		{"KillQueued", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.acquire("A", 1, worklease.Acquired)
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			mustEqual(t, worklease.Head{}, e.kill("A", 2, "poison"), "Kill of a queued offset on a busy domain")
			mustEqual(t, []int64{3}, e.inspect("A").Backlog)
			mustEqual(t, []worklease.DeadLetter{{Domain: "A", Offset: 2, Cause: errors.New("poison"), At: epoch}}, e.deadLetters("A"))
			e.acquire("A", 2, worklease.AlreadyFailed)
		}},
		{"KillInFlight", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(2))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.fail("A", tok, nil)
			e.acquire("A", 2, worklease.Enqueued)
			mustEqual(t, worklease.Head{Next: 2, HasNext: true}, e.kill("A", 1, "stuck"))
			mustEqual(t, []worklease.DeadLetter{{Domain: "A", Offset: 1, Cause: errors.New("stuck"), Attempts: 2, At: epoch}}, e.deadLetters("A"))
			_, err := e.b.Succeed(e.ctx, "A", tok)
			mustSentinel(t, worklease.ErrLeaseRevoked, err, "the killed lease's holder")
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{2}, Failed: 1}, e.inspect("A"))
		}},
		{"KillUnseen", func(t *testing.T, s *Suite) {
			e := s.start(t)
			mustEqual(t, worklease.Head{}, e.kill("A", 7, ""))
			mustEqual(t, []string{"A"}, e.domains(), "Kill made the domain")
			mustEqual(t, []worklease.DeadLetter{{Domain: "A", Offset: 7, At: epoch}}, e.deadLetters("A"))
			e.acquire("A", 7, worklease.AlreadyFailed)
			mustEqual(t, worklease.Head{}, e.kill("A", 7, "again"), "Kill of a failed offset")
			mustEqual(t, []worklease.DeadLetter{{Domain: "A", Offset: 7, At: epoch}}, e.deadLetters("A"), "a second Kill changes nothing")
		}},
		{"RedriveRunsFirst", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.fail("A", tok, nil)
			other := e.acquire("A", 2, worklease.Acquired).Token
			mustEqual(t, worklease.Head{}, e.redrive("A", 1), "Redrive on a busy domain")
			mustEqual(t, worklease.DomainInfo{Leased: true, Lease: worklease.LeaseInfo{Domain: "A", Offset: 2, Token: other, AcquiredAt: epoch}, Backlog: []int64{1}}, e.inspect("A"))
			mustEqual(t, 0, len(e.deadLetters("A")), "dead letters after Redrive")
			res := e.succeedNext("A", other)
			mustEqual(t, int64(1), res.Lease.Offset)
			e.succeed("A", res.Lease.Token)
			mustEqual(t, worklease.DomainInfo{Processed: 2}, e.inspect("A"))
		}},
		{"ForceReleaseKeepsAttempts", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(3))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.fail("A", tok, nil)
			e.clk.Advance(5 * time.Millisecond)
			mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.forceRelease("A"))
			_, err := e.b.Fail(e.ctx, "A", tok, nil)
			mustSentinel(t, worklease.ErrLeaseRevoked, err, "the released lease's holder")
			res := e.acquire("A", 1, worklease.Acquired)
			mustEqual(t, worklease.AcquireResult{Status: worklease.Acquired, Token: res.Token, AcquiredAt: epoch, RetryCount: 1}, res,
				"a released offset keeps its retries and first grant")
			e.pause("A")
			mustEqual(t, worklease.Head{}, e.forceRelease("A"), "ForceRelease on a paused domain")
		}},
		{"PauseResume", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.pause("A")
			e.pause("A") // twice changes nothing
			mustEqual(t, []string{"A"}, e.domains(), "Pause made the domain")
			e.acquire("A", 1, worklease.Enqueued)
			e.acquire("A", 2, worklease.Enqueued)
			mustEqual(t, worklease.DomainInfo{Paused: true, Backlog: []int64{1, 2}}, e.inspect("A"))
			mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.resume("A"))
			mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.resume("A"), "Resume of a running domain")
			mustEqual(t, worklease.Head{}, e.resume("nobody"), "Resume of an unknown domain")
			mustEqual(t, []string{"A"}, e.domains(), "Resume made a domain")
			e.acquire("A", 1, worklease.Acquired)
		}},
		{"PausedAnswers", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			e.succeed("A", e.acquire("A", 1, worklease.Acquired).Token)
			e.fail("A", e.acquire("A", 2, worklease.Acquired).Token, nil)
			tok := e.acquire("A", 3, worklease.Acquired).Token
			e.pause("A")
			e.acquire("A", 1, worklease.AlreadyProcessed)
			e.acquire("A", 2, worklease.AlreadyFailed)
			mustEqual(t, tok, e.acquire("A", 3, worklease.AlreadyAcquired).Token)
			e.acquire("A", 4, worklease.Enqueued)
			mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 4}, e.succeed("A", tok))
			e.acquire("A", 4, worklease.Enqueued)
		}},
		{"ParkThenResume", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithParkOnDeadLetter(), worklease.WithMaxRetries(0))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpParked}, e.fail("A", tok, nil))
			mustEqual(t, worklease.DomainInfo{Paused: true, Backlog: []int64{2}, Failed: 1}, e.inspect("A"))
			e.acquire("A", 2, worklease.Enqueued)
			e.refused(worklease.ErrDomainBusy, func() error { return e.b.Forget(e.ctx, "A") })
			mustEqual(t, worklease.Head{Next: 2, HasNext: true}, e.resume("A"))
			e.acquire("A", 2, worklease.Acquired)
			mustEqual(t, worklease.Head{}, e.kill("A", 2, "x"), "Kill never parks")
			mustFalse(t, e.inspect("A").Paused, "Kill parked the domain")
			tok = e.acquire("A", 3, worklease.Acquired).Token
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpParked}, e.fail("A", tok, nil), "parked without a backlog")
		}},
		{"Forget", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			first := e.acquire("A", 1, worklease.Acquired).Token
			e.succeed("A", first)
			e.fail("A", e.acquire("A", 2, worklease.Acquired).Token, nil)
			e.acquire("B", 1, worklease.Acquired)
			e.forget("A")
			e.forget("A")      // twice changes nothing
			e.forget("nobody") // nor does an unknown domain
			mustEqual(t, []string{"B"}, e.domains())
			mustEqual(t, worklease.DomainInfo{}, e.inspect("A"))
			mustEqual(t, 0, len(e.deadLetters("A")), "dead letters of a forgotten domain")
			again := e.acquire("A", 1, worklease.Acquired).Token // history is gone
			mustTrue(t, again.Fence() > first.Fence(), "fences of a domain forgotten and made again carry on: %d after %d", again.Fence(), first.Fence())
			_, err := e.b.Succeed(e.ctx, "A", first)
			mustSentinel(t, worklease.ErrTokenMismatch, err, "a token from before Forget")
			e.acquire("A", 2, worklease.Enqueued)
		}},
		{"LeasesByDomain", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			mustEqual(t, 0, len(e.leases()), "Leases of an empty backend")
			tc := e.acquire("c", 3, worklease.Acquired).Token
			e.clk.Advance(time.Millisecond)
			ta := e.acquire("a", 1, worklease.Acquired).Token
			e.succeed("b", e.acquire("b", 2, worklease.Acquired).Token)
			mustEqual(t, []worklease.LeaseInfo{
				{Domain: "a", Offset: 1, Token: ta, AcquiredAt: epoch.Add(time.Millisecond), ExpiresAt: epoch.Add(time.Millisecond + ttl)},
				{Domain: "c", Offset: 3, Token: tc, AcquiredAt: epoch, ExpiresAt: epoch.Add(ttl)},
			}, e.leases())
			mustEqual(t, []string{"a", "b", "c"}, e.domains())
		}},
		{"DeadLettersOrder", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.kill("b", 9, "x")
			e.kill("a", 5, "y")
			e.kill("b", 1, "z")
			e.kill("a", 7, "")
			got := e.deadLetters("")
			var keys [][2]any
			for _, dl := range got {
				keys = append(keys, [2]any{dl.Domain, dl.Offset})
			}
			mustEqual(t, [][2]any{{"a", int64(5)}, {"a", int64(7)}, {"b", int64(1)}, {"b", int64(9)}}, keys, "ordered by domain, then offset")
			mustEqual(t, got[2:], e.deadLetters("b"))
		}},
	}, adminSpecCases)
}

// adminSpecCases are the area's cases that came from the root package's tests.
var adminSpecCases = []testCase{
	{"Redrive", specRedrive},
	{"RedriveWhileBusy", specRedriveWhileBusy},
	{"RedriveNotDeadLettered", specRedriveNotDeadLettered},
	{"ForgetParked", specForgetParked},
	{"ForgetThenRecreate", specForgetThenRecreate},
	{"PauseWhileLeased", specPauseWhileLeased},
	{"ParkOnDeadLetter", specParkOnDeadLetter},
	{"ParkWithoutBacklog", specParkWithoutBacklog},
	{"ForceRelease", specForceRelease},
	{"ForceReleasePausedDomain", specForceReleasePausedDomain},
	{"Leases", specLeases},
	{"DeadLettersAcrossDomains", specDeadLettersAcrossDomains},
	{"InspectShowsPausedAndExpiry", specInspectShowsPausedAndExpiry},
	{"PauseKeepsOtherAnswers", specPauseKeepsOtherAnswers},
}

// Redrive puts a dead letter back at the front of its own domain's line,
// before offsets queued earlier, with a fresh attempt count.
func specRedrive(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(1))
	res := e.acquire("A", 1, worklease.Acquired)
	e.acquire("A", 2, worklease.Enqueued)
	e.acquire("A", 3, worklease.Enqueued)
	for range 2 {
		_, err := e.b.Fail(e.ctx, "A", res.Token, errors.New("bad"))
		mustNoError(t, err)
	}
	mustLen(t, e.deadLetters("A"), 1)
	e.acquire("B", 1, worklease.Acquired) // another domain is not involved

	now := e.clk.Advance(time.Hour)
	got, err := e.b.Redrive(e.ctx, "A", 1)
	mustNoError(t, err)
	mustEqual(t, worklease.Head{Next: 1, HasNext: true}, got, "the domain is idle: acquire it")
	mustEqual(t, []int64{1, 2, 3}, e.inspect("A").Backlog, "at the front, before older queued offsets")
	mustEmpty(t, e.deadLetters("A"))
	mustEqual(t, []int64(nil), e.inspect("B").Backlog)

	again := e.acquire("A", 1, worklease.Acquired)
	mustEqual(t, 0, again.RetryCount, "a fresh attempt count")
	mustEqual(t, now, again.AcquiredAt)
	mustGreater(t, again.Token.Fence(), res.Token.Fence())
	fres, err := e.b.Fail(e.ctx, "A", again.Token, nil)
	mustNoError(t, err)
	mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 1}, fres)
	mustEqual(t, []int64{2, 3}, e.drainHints("A", again.Token))
}

// Redriving while the domain is busy queues the offset next in line and
// hints at nothing.
func specRedriveWhileBusy(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithOrdering(worklease.LIFO))
	_, err := e.b.Kill(e.ctx, "A", 1, "x")
	mustNoError(t, err)
	holder := e.acquire("A", 5, worklease.Acquired)
	e.acquire("A", 6, worklease.Enqueued)
	e.acquire("A", 7, worklease.Enqueued)
	got, err := e.b.Redrive(e.ctx, "A", 1)
	mustNoError(t, err)
	mustEqual(t, worklease.Head{}, got)
	mustEqual(t, []int64{1, 7, 6}, e.inspect("A").Backlog)
	mustEqual(t, []int64{1, 7, 6}, e.drainHints("A", holder.Token))
}

func specRedriveNotDeadLettered(t *testing.T, s *Suite) {
	tests := []struct {
		name   string
		domain string
		offset int64
	}{
		{"processed", "A", 1},
		{"in flight", "A", 2},
		{"queued", "A", 3},
		{"never seen", "A", 9},
		{"unknown domain", "nobody", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t)
			res := e.acquire("A", 1, worklease.Acquired)
			_, err := e.b.Succeed(e.ctx, "A", res.Token)
			mustNoError(t, err)
			e.acquire("A", 2, worklease.Acquired)
			e.acquire("A", 3, worklease.Enqueued)
			before := e.snapshot("A", "nobody")

			got, err := e.b.Redrive(e.ctx, tt.domain, tt.offset)
			mustErrorIs(t, err, worklease.ErrNotDeadLettered)
			mustEqual(t, worklease.Head{}, got)
			mustEqual(t, before, e.snapshot("A", "nobody"))
		})
	}
}

// Forget refuses a domain parked by WithParkOnDeadLetter, as any paused
// one: forgetting it would drop the pause, and the next offset would run.
// Resume first.
func specForgetParked(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(0), worklease.WithParkOnDeadLetter())
	res := e.acquire("A", 1, worklease.Acquired)
	fres, err := e.b.Fail(e.ctx, "A", res.Token, errors.New("poison"))
	mustNoError(t, err)
	mustEqual(t, worklease.GiveUpParked, fres.Status)
	mustErrorIs(t, e.b.Forget(e.ctx, "A"), worklease.ErrDomainBusy)
	mustTrue(t, e.inspect("A").Paused, "the pause is kept")
	_, err = e.b.Resume(e.ctx, "A")
	mustNoError(t, err)
	mustNoError(t, e.b.Forget(e.ctx, "A"))
	e.acquire("A", 2, worklease.Acquired)
}

// Once forgotten, a domain's old offsets can be acquired again, and its
// fences carry on above every fence it had before, so a downstream store
// still rejects its old holders.
func specForgetThenRecreate(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(0))
	var lastFence uint64
	var oldTokens []worklease.Token
	for round := range 3 {
		done := e.acquire("A", 1, worklease.Acquired)
		mustGreater(t, done.Token.Fence(), lastFence, "round %d", round)
		_, err := e.b.Succeed(e.ctx, "A", done.Token)
		mustNoError(t, err)
		failed := e.acquire("A", 2, worklease.Acquired)
		_, err = e.b.Fail(e.ctx, "A", failed.Token, nil)
		mustNoError(t, err)
		e.acquire("A", 1, worklease.AlreadyProcessed)
		e.acquire("A", 2, worklease.AlreadyFailed)
		lastFence = failed.Token.Fence()
		oldTokens = append(oldTokens, done.Token, failed.Token)

		mustNoError(t, e.b.Forget(e.ctx, "A"))
		mustEqual(t, worklease.DomainInfo{}, e.inspect("A"))
	}
	cur := e.acquire("A", 1, worklease.Acquired)
	mustGreater(t, cur.Token.Fence(), lastFence)
	for _, tok := range oldTokens {
		_, err := e.b.Succeed(e.ctx, "A", tok)
		mustErrorIs(t, err, worklease.ErrTokenMismatch)
	}
}

// Pausing a domain with a lease in flight lets the lease carry on; nothing
// more is granted until Resume.
func specPauseWhileLeased(t *testing.T, s *Suite) {
	e := s.start(t)
	holder := e.acquire("A", 1, worklease.Acquired)
	e.acquire("A", 2, worklease.Enqueued)
	mustNoError(t, e.b.Pause(e.ctx, "A"))
	info := e.inspect("A")
	mustTrue(t, info.Paused)
	mustTrue(t, info.Leased)
	e.acquire("A", 1, worklease.AlreadyAcquired)

	_, err := e.b.Succeed(e.ctx, "A", holder.Token)
	mustNoError(t, err)
	e.acquire("A", 2, worklease.Enqueued) // paused: not granted
	e.acquire("A", 3, worklease.Enqueued)
	mustEqual(t, worklease.DomainInfo{Paused: true, Backlog: []int64{2, 3}, Processed: 1}, e.inspect("A"))

	got, err := e.b.Resume(e.ctx, "A")
	mustNoError(t, err)
	mustEqual(t, worklease.Head{Next: 2, HasNext: true}, got)
	e.acquire("A", 2, worklease.Acquired)
}

// With WithParkOnDeadLetter, a dead letter pauses its domain: later offsets
// wait until an operator resumes it.
func specParkOnDeadLetter(t *testing.T, s *Suite) {
	const ttl = time.Minute
	tests := []struct {
		name       string
		deadLetter func(t *testing.T, e *env, tok worklease.Token)
	}{
		{"by Fail", func(t *testing.T, e *env, tok worklease.Token) {
			fres, err := e.b.Fail(e.ctx, "A", tok, errors.New("bad"))
			mustNoError(t, err)
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpParked}, fres)
		}},
		{"by expiry", func(t *testing.T, e *env, tok worklease.Token) {
			e.clk.Advance(ttl)
			exp, err := e.b.Reap(e.ctx)
			mustNoError(t, err)
			mustEqual(t, []worklease.Expiry{{Domain: "A", Offset: 1, Token: tok, Attempts: 1, DeadLettered: true}}, exp,
				"parked: no next offset to acquire")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, worklease.WithParkOnDeadLetter(), worklease.WithMaxRetries(0), worklease.WithLeaseTTL(ttl))
			res := e.acquire("A", 1, worklease.Acquired)
			e.acquire("A", 2, worklease.Enqueued)
			b := e.acquire("B", 1, worklease.Acquired)
			_, err := e.b.Succeed(e.ctx, "B", b.Token)
			mustNoError(t, err)

			tt.deadLetter(t, e, res.Token)
			mustLen(t, e.deadLetters("A"), 1)
			info := e.inspect("A")
			mustTrue(t, info.Paused, "parked")
			mustFalse(t, info.Leased)
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			mustEqual(t, []int64{2, 3}, e.inspect("A").Backlog)
			mustFalse(t, e.inspect("B").Paused, "other domains are not parked")
			e.acquire("B", 2, worklease.Acquired)

			got, err := e.b.Resume(e.ctx, "A")
			mustNoError(t, err)
			mustEqual(t, worklease.Head{Next: 2, HasNext: true}, got)
			two := e.acquire("A", 2, worklease.Acquired)
			mustEqual(t, []int64{3}, e.drainHints("A", two.Token))
		})
	}
}

func specParkWithoutBacklog(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithParkOnDeadLetter(), worklease.WithMaxRetries(1))
	res := e.acquire("A", 1, worklease.Acquired)
	fres, err := e.b.Fail(e.ctx, "A", res.Token, nil)
	mustNoError(t, err)
	mustEqual(t, worklease.RetryScheduled, fres.Status, "a retry does not park")
	mustFalse(t, e.inspect("A").Paused)
	fres, err = e.b.Fail(e.ctx, "A", res.Token, nil)
	mustNoError(t, err)
	mustEqual(t, worklease.FailResult{Status: worklease.GiveUpParked, RetryCount: 1}, fres)
	got, err := e.b.Resume(e.ctx, "A")
	mustNoError(t, err)
	mustEqual(t, worklease.Head{}, got)
	mustFalse(t, e.inspect("A").Paused)
}

// ForceRelease takes a stuck lease back: the holder is refused with
// ErrLeaseRevoked, and the offset is granted again under a new token,
// keeping its attempt count and first-acquired time.
func specForceRelease(t *testing.T, s *Suite) {
	const ttl = 30 * time.Second
	e := s.start(t, worklease.WithLeaseTTL(ttl))
	holder := e.acquire("A", 1, worklease.Acquired)
	_, err := e.b.Fail(e.ctx, "A", holder.Token, nil)
	mustNoError(t, err)
	e.acquire("A", 2, worklease.Enqueued)
	now := e.clk.Advance(5 * time.Second)

	got, err := e.b.ForceRelease(e.ctx, "A")
	mustNoError(t, err)
	mustEqual(t, worklease.Head{Next: 1, HasNext: true}, got)
	mustEqual(t, worklease.DomainInfo{Backlog: []int64{1, 2}}, e.inspect("A"))
	for _, call := range staleCalls {
		mustErrorIs(t, call.call(e, "A", holder.Token), worklease.ErrLeaseRevoked, call.name)
	}
	_, err = e.b.TryAcquire(e.ctx, "A", 2)
	mustErrorIs(t, err, worklease.ErrBacklogOrder, "the released offset is next in line")

	again := e.acquire("A", 1, worklease.Acquired)
	mustEqual(t, 1, again.RetryCount, "the attempt count is kept: a release is not a failure")
	mustEqual(t, epoch, again.AcquiredAt)
	mustEqual(t, now.Add(ttl), again.ExpiresAt)
	mustGreater(t, again.Token.Fence(), holder.Token.Fence())
	mustErrorIs(t, staleCalls[0].call(e, "A", holder.Token), worklease.ErrLeaseRevoked)
	mustEqual(t, []int64{2}, e.drainHints("A", again.Token))

	_, err = e.b.ForceRelease(e.ctx, "A")
	mustErrorIs(t, err, worklease.ErrNoLease, "idle")
	_, err = e.b.ForceRelease(e.ctx, "nobody")
	mustErrorIs(t, err, worklease.ErrNoLease, "unknown")
}

func specForceReleasePausedDomain(t *testing.T, s *Suite) {
	e := s.start(t)
	e.acquire("A", 1, worklease.Acquired)
	mustNoError(t, e.b.Pause(e.ctx, "A"))
	got, err := e.b.ForceRelease(e.ctx, "A")
	mustNoError(t, err)
	mustEqual(t, worklease.Head{}, got, "paused: nothing to acquire yet")
	e.acquire("A", 1, worklease.Enqueued)
	got, err = e.b.Resume(e.ctx, "A")
	mustNoError(t, err)
	mustEqual(t, worklease.Head{Next: 1, HasNext: true}, got)
}

// Leases lists every lease in flight, sorted by domain, including one that
// has expired but not yet been revoked.
func specLeases(t *testing.T, s *Suite) {
	const ttl = time.Minute
	e := s.start(t, worklease.WithLeaseTTL(ttl))
	leases, err := e.b.Leases(e.ctx)
	mustNoError(t, err)
	mustEmpty(t, leases)

	stale := e.acquire("d-expired", 3, worklease.Acquired)
	e.clk.Advance(ttl)
	c := e.acquire("c", 7, worklease.Acquired)
	_, err = e.b.Fail(e.ctx, "c", c.Token, nil)
	mustNoError(t, err)
	a := e.acquire("a", 1, worklease.Acquired)
	e.acquire("a", 2, worklease.Enqueued)
	idle := e.acquire("b-idle", 1, worklease.Acquired)
	_, err = e.b.Succeed(e.ctx, "b-idle", idle.Token)
	mustNoError(t, err)

	leases, err = e.b.Leases(e.ctx)
	mustNoError(t, err)
	mustEqual(t, []worklease.LeaseInfo{
		{Domain: "a", Offset: 1, Token: a.Token, AcquiredAt: epoch.Add(ttl), ExpiresAt: epoch.Add(2 * ttl)},
		{Domain: "c", Offset: 7, Token: c.Token, AcquiredAt: epoch.Add(ttl), ExpiresAt: epoch.Add(2 * ttl), RetryCount: 1},
		{Domain: "d-expired", Offset: 3, Token: stale.Token, AcquiredAt: epoch, ExpiresAt: epoch.Add(ttl)},
	}, leases)

	_, err = e.b.Reap(e.ctx)
	mustNoError(t, err)
	leases, err = e.b.Leases(e.ctx)
	mustNoError(t, err)
	mustLen(t, leases, 2, "reaped")
}

// DeadLetters("") lists every domain's dead letters, by domain then offset.
func specDeadLettersAcrossDomains(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(0))
	t0 := e.clk.Now()
	for _, kill := range []struct {
		domain string
		offset int64
	}{{"b", 9}, {"a", 5}, {"b", 1}, {"a", 20}} {
		_, err := e.b.Kill(e.ctx, kill.domain, kill.offset, "killed")
		mustNoError(t, err)
	}
	t1 := e.clk.Advance(time.Second)
	res := e.acquire("a", 2, worklease.Acquired)
	boom := errors.New("boom")
	_, err := e.b.Fail(e.ctx, "a", res.Token, boom)
	mustNoError(t, err)
	done := e.acquire("c", 1, worklease.Acquired) // a domain without dead letters
	_, err = e.b.Succeed(e.ctx, "c", done.Token)
	mustNoError(t, err)

	all := e.deadLetters("")
	mustLen(t, all, 5)
	killed := errors.New("killed") // causes compare by their text
	mustEqual(t, []worklease.DeadLetter{
		{Domain: "a", Offset: 2, Cause: boom, Attempts: 1, At: t1},
		{Domain: "a", Offset: 5, Cause: killed, At: t0},
		{Domain: "a", Offset: 20, Cause: killed, At: t0},
		{Domain: "b", Offset: 1, Cause: killed, At: t0},
		{Domain: "b", Offset: 9, Cause: killed, At: t0},
	}, all)

	b := e.deadLetters("b")
	mustLen(t, b, 2)
	mustEqual(t, []int64{1, 9}, []int64{b[0].Offset, b[1].Offset})
	mustEmpty(t, e.deadLetters("c"))
	mustEmpty(t, e.deadLetters("nobody"))
}

// Inspect shows whether a domain is paused and when its lease expires.
func specInspectShowsPausedAndExpiry(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithLeaseTTL(30*time.Second))
	res := e.acquire("A", 1, worklease.Acquired)
	e.acquire("A", 2, worklease.Enqueued)
	mustNoError(t, e.b.Pause(e.ctx, "A"))
	e.clk.Advance(10 * time.Second)
	_, err := e.b.Extend(e.ctx, "A", res.Token, time.Minute)
	mustNoError(t, err)
	mustEqual(t, worklease.DomainInfo{
		Leased: true,
		Lease: worklease.LeaseInfo{
			Domain: "A", Offset: 1, Token: res.Token, AcquiredAt: epoch, ExpiresAt: epoch.Add(70 * time.Second),
		},
		Paused:  true,
		Backlog: []int64{2},
	}, e.inspect("A"))

	e.clk.Advance(time.Minute) // Inspect revokes the expired lease first
	mustEqual(t, worklease.DomainInfo{Paused: true, Backlog: []int64{1, 2}}, e.inspect("A"))
}

// A paused domain queues what it would grant, and nothing else: processed,
// failed and in-flight offsets answer as they would running.
func specPauseKeepsOtherAnswers(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(0))
	res := e.acquire("A", 1, worklease.Acquired)
	_, err := e.b.Succeed(e.ctx, "A", res.Token)
	mustNoError(t, err)
	res = e.acquire("A", 2, worklease.Acquired)
	_, err = e.b.Fail(e.ctx, "A", res.Token, errors.New("poison"))
	mustNoError(t, err)
	res = e.acquire("A", 3, worklease.Acquired)
	mustNoError(t, e.b.Pause(e.ctx, "A"))

	e.acquire("A", 1, worklease.AlreadyProcessed)
	e.acquire("A", 2, worklease.AlreadyFailed)
	again := e.acquire("A", 3, worklease.AlreadyAcquired)
	mustEqual(t, res.Token, again.Token)
	e.acquire("A", 4, worklease.Enqueued)
	_, err = e.b.Succeed(e.ctx, "A", res.Token)
	mustNoError(t, err)
	e.acquire("A", 4, worklease.Enqueued)
	mustEqual(t, []int64{4}, e.inspect("A").Backlog)
}
