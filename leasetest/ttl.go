package leasetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// ttl is the lease TTL of the TTL cases.
const ttl = 10 * time.Second

// testTTL is the TTL area: WithLeaseTTL, Extend and Reap.
func testTTL(t *testing.T, s *Suite) {
	runCases(t, s, []testCase{
		{"ExpiryOnTouch", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(3))
			res := e.acquire("A", 1, worklease.Acquired)
			mustEqual(t, epoch.Add(ttl), res.ExpiresAt, "ExpiresAt")
			e.acquire("A", 2, worklease.Enqueued)
			e.clk.Advance(ttl - time.Millisecond)
			e.acquire("A", 1, worklease.AlreadyAcquired)
			e.clk.Advance(time.Millisecond) // at the deadline, the lease has run out
			// Leases revokes nothing: the lease is listed, due.
			mustEqual(t, []worklease.LeaseInfo{{Domain: "A", Offset: 1, Token: res.Token, AcquiredAt: epoch, ExpiresAt: epoch.Add(ttl)}}, e.leases())
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{1, 2}}, e.inspect("A"), "after the expiry, the offset is first in line")
			_, err := e.b.Succeed(e.ctx, "A", res.Token)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "Succeed after the expiry")
			again := e.acquire("A", 1, worklease.Acquired)
			mustEqual(t, worklease.AcquireResult{Status: worklease.Acquired, Token: again.Token, AcquiredAt: epoch,
				ExpiresAt: e.clk.Now().Add(ttl), RetryCount: 1}, again, "the grant after an expiry")
			mustTrue(t, again.Token.Fence() > res.Token.Fence(), "fence did not grow")
		}},
		{"ExtendMany", func(t *testing.T, s *Suite) {
			// ExtendMany renews each lease as Extend would, in order, and
			// refuses a duration that is not positive as a whole.
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			a := e.acquire("A", 1, worklease.Acquired).Token
			b := e.acquire("B", 1, worklease.Acquired).Token
			e.clk.Advance(time.Second)
			c := e.acquire("C", 1, worklease.Acquired).Token
			e.succeed("A", a)
			e.clk.Advance(ttl - time.Second) // B's lease is due; C's is not
			claims := []worklease.Claim{{Domain: "C", Token: c}, {Domain: "B", Token: b}, {Domain: "A", Token: a}, {Domain: ""}}
			at, errs, err := e.b.ExtendMany(e.ctx, claims, 2*ttl)
			mustNoError(t, err, "ExtendMany")
			mustErrors(t, "ExtendMany", []error{nil, worklease.ErrLeaseExpired, worklease.ErrNoLease, worklease.ErrInvalidDomain}, errs)
			mustEqual(t, []time.Time{e.clk.Now().Add(2 * ttl), {}, {}, {}}, at, "ExtendMany's expiries")
			mustEqual(t, e.clk.Now().Add(2*ttl), e.leasesOf("C")[0].ExpiresAt, "C's expiry")
			for _, by := range []time.Duration{0, -time.Second} {
				at, errs, err = e.b.ExtendMany(e.ctx, claims[:1], by)
				mustSentinel(t, worklease.ErrInvalidDuration, err, "ExtendMany by %v", by)
				mustTrue(t, at == nil && errs == nil, "ExtendMany by %v: answers beside its error", by)
			}
			mustEqual(t, e.clk.Now().Add(2*ttl), e.leasesOf("C")[0].ExpiresAt, "C's expiry after refusals")
		}},
		{"ReapRevokesDue", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(1))
			ta := e.acquire("A", 1, worklease.Acquired).Token
			tb := e.acquire("B", 5, worklease.Acquired).Token
			e.acquire("B", 6, worklease.Enqueued)
			e.clk.Advance(time.Second)
			tc := e.acquire("C", 1, worklease.Acquired).Token
			mustEqual(t, 0, len(e.reap()), "Reap before any deadline")
			e.clk.Advance(ttl - time.Second)
			mustEqual(t, []worklease.Expiry{
				{Domain: "A", Offset: 1, Token: ta, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}},
				{Domain: "B", Offset: 5, Token: tb, Attempts: 1, Head: worklease.Head{Next: 5, HasNext: true}},
			}, e.reap())
			mustEqual(t, 0, len(e.reap()), "Reap again")
			_, err := e.b.Fail(e.ctx, "A", ta, nil)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "Fail after Reap")
			mustEqual(t, []worklease.LeaseInfo{{Domain: "C", Offset: 1, Token: tc, AcquiredAt: epoch.Add(time.Second), ExpiresAt: epoch.Add(time.Second + ttl)}}, e.leases())
			// The last attempt's expiry dead-letters the offset.
			tb = e.acquire("B", 5, worklease.Acquired).Token
			e.clk.Advance(ttl)
			mustEqual(t, []worklease.Expiry{
				{Domain: "B", Offset: 5, Token: tb, Attempts: 2, DeadLettered: true, Head: worklease.Head{Next: 6, HasNext: true}},
				{Domain: "C", Offset: 1, Token: tc, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}},
			}, e.reap())
			dls := e.deadLetters("B")
			mustEqual(t, 1, len(dls), "dead letters")
			mustErrorIs(t, dls[0].Cause, worklease.ErrLeaseExpired, "the dead letter's cause")
			mustEqual(t, worklease.DeadLetter{Domain: "B", Offset: 5, Cause: worklease.ErrLeaseExpired, Attempts: 2, At: e.clk.Now()}, dls[0])
		}},
		{"ReapPausedDomain", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.pause("A")
			e.clk.Advance(ttl)
			mustEqual(t, []worklease.Expiry{{Domain: "A", Offset: 1, Token: tok, Attempts: 1}}, e.reap(), "a paused domain has no head to acquire")
		}},
		{"ExtendNeverShortens", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(8 * time.Second)
			mustEqual(t, e.clk.Now().Add(30*time.Second), e.extend("A", tok, 30*time.Second), "Extend")
			mustEqual(t, e.clk.Now().Add(30*time.Second), e.extend("A", tok, time.Second), "Extend never shortens")
			e.clk.Advance(29 * time.Second)
			e.acquire("A", 1, worklease.AlreadyAcquired)
			mustEqual(t, e.clk.Now().Add(ttl), e.extend("A", tok, ttl), "Extend")
			mustEqual(t, e.clk.Now().Add(ttl), e.inspect("A").Lease.ExpiresAt, "Inspect after Extend")
			e.clk.Advance(ttl) // at the deadline, too late
			_, err := e.b.Extend(e.ctx, "A", tok, time.Hour)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "Extend at the deadline")
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{1}, Processed: 0}, e.inspect("A"), "the lease Extend found expired is revoked")
			e.refused(worklease.ErrLeaseExpired, func() error { _, err := e.b.Extend(e.ctx, "A", tok, time.Hour); return err })
		}},
		{"FailThenExpiry", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(2))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 1}, e.fail("A", tok, errors.New("x")))
			e.clk.Advance(ttl)
			res := e.acquire("A", 1, worklease.Acquired)
			mustEqual(t, 2, res.RetryCount, "retries after a failure and an expiry")
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 2}, e.fail("A", res.Token, errors.New("last")))
			mustEqual(t, []worklease.DeadLetter{{Domain: "A", Offset: 1, Cause: errors.New("last"), Attempts: 3, At: e.clk.Now()}}, e.deadLetters("A"))
		}},
		{"DeadLetterAfterLastExpiry", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(1))
			e.acquire("A", 1, worklease.Acquired)
			e.acquire("A", 2, worklease.Enqueued)
			e.clk.Advance(ttl)
			mustEqual(t, []int64{1, 2}, e.inspect("A").Backlog, "the expired offset is back in front")
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(ttl)
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{2}, Failed: 1}, e.inspect("A"))
			e.acquire("A", 1, worklease.AlreadyFailed)
			mustEqual(t, []worklease.DeadLetter{{Domain: "A", Offset: 1, Cause: worklease.ErrLeaseExpired, Attempts: 2, At: e.clk.Now()}}, e.deadLetters("A"))
			_, err := e.b.Succeed(e.ctx, "A", tok)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "Succeed after the last expiry")
		}},
		{"RetryGivesFullTTL", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(8 * time.Second)
			e.fail("A", tok, nil)
			mustEqual(t, e.clk.Now().Add(ttl), e.inspect("A").Lease.ExpiresAt, "the expiry after a retry")
			e.extend("A", tok, time.Minute)
			e.fail("A", tok, nil)
			mustEqual(t, e.clk.Now().Add(time.Minute), e.inspect("A").Lease.ExpiresAt, "a retry never shortens a lease")
		}},
		{"WithoutTTL", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(1000 * time.Hour)
			mustTrue(t, e.extend("A", tok, time.Hour).IsZero(), "Extend without a TTL returns the zero time")
			mustEqual(t, 0, len(e.reap()), "Reap without a TTL")
			e.acquire("A", 1, worklease.AlreadyAcquired)
			mustTrue(t, e.leases()[0].ExpiresAt.IsZero(), "a lease without a TTL never expires")
		}},
	}, ttlSpecCases)
}

// The TTL scenarios: leases as visibility timeouts, failure strategies,
// renewal and reaping.

// staleCalls are the three calls a holder makes with its token, each
// returning only its error.
var staleCalls = []struct {
	name string
	call func(e *env, domain string, tok worklease.Token) error
}{
	{"Succeed", func(e *env, d string, tok worklease.Token) error {
		_, err := e.b.Succeed(e.ctx, d, tok)
		return err
	}},
	{"Fail", func(e *env, d string, tok worklease.Token) error {
		_, err := e.b.Fail(e.ctx, d, tok, errors.New("late"))
		return err
	}},
	{"Extend", func(e *env, d string, tok worklease.Token) error {
		_, err := e.b.Extend(e.ctx, d, tok, time.Minute)
		return err
	}},
}

// ttlSpecCases are the area's cases that came from the root package's tests.
var ttlSpecCases = []testCase{
	{"LockVisibilityTimeout", specLockVisibilityTimeout},
	{"ReleaseLockOnSuccess", specReleaseLockOnSuccess},
	{"ReleaseLockOnFailure", specReleaseLockOnFailure},
	{"RetryToOriginalQueue", specRetryToOriginalQueue},
	{"RouteToDeadLetterQueue", specRouteToDeadLetterQueue},
	{"RetryThenDeadLetter", specRetryThenDeadLetter},
	{"RenewLockBeforeTimeout", specRenewLockBeforeTimeout},
	{"PreventRenewalAfterRelease", specPreventRenewalAfterRelease},
	{"ExpiryIsAFailedAttempt", specExpiryIsAFailedAttempt},
	{"FailAndExpiryShareRetries", specFailAndExpiryShareRetries},
	{"Extend", specExtend},
	{"ExtendWithoutTTL", specExtendWithoutTTL},
	{"ReapWithoutTTL", specReapWithoutTTL},
	{"ExtendAtExpiryIsTooLate", specExtendAtExpiryIsTooLate},
	{"Reap", specReap},
	{"TokenCheckOrder", specTokenCheckOrder},
}

// The queue scenario "Lock visibility timeout": given a worker holds a lock token,
// when it does not acknowledge completion within the visibility timeout, then
// the lock expires and the message becomes available for other workers to
// re-acquire (under a new token with a higher fence), and the first worker's
// token is refused with ErrLeaseExpired.
func specLockVisibilityTimeout(t *testing.T, s *Suite) {
	const ttl = 30 * time.Second
	for _, stale := range staleCalls {
		t.Run("stale "+stale.name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			w1 := e.acquire("queue", 1, worklease.Acquired)
			mustEqual(t, epoch.Add(ttl), w1.ExpiresAt)

			e.clk.Advance(ttl - time.Millisecond)
			held := e.acquire("queue", 1, worklease.AlreadyAcquired)
			mustEqual(t, w1.Token, held.Token, "still hidden just before the timeout")

			e.clk.Advance(time.Millisecond) // the lease runs out exactly at ExpiresAt
			w2 := e.acquire("queue", 1, worklease.Acquired)
			mustNotEqual(t, w1.Token, w2.Token, "re-acquired under a new token")
			mustGreater(t, w2.Token.Fence(), w1.Token.Fence())
			mustEqual(t, 1, w2.RetryCount, "the expiry counts as a failed attempt")
			mustEqual(t, epoch, w2.AcquiredAt, "AcquiredAt marks the first grant")
			mustEqual(t, epoch.Add(2*ttl), w2.ExpiresAt, "the new grant gets a full TTL")

			mustErrorIs(t, stale.call(e, "queue", w1.Token), worklease.ErrLeaseExpired)
			info := e.inspect("queue")
			mustTrue(t, info.Leased)
			mustEqual(t, w2.Token, info.Lease.Token, "the stale call changed nothing")
			mustEqual(t, epoch.Add(2*ttl), info.Lease.ExpiresAt)

			_, err := e.b.Succeed(e.ctx, "queue", w2.Token)
			mustNoError(t, err)
			mustErrorIs(t, stale.call(e, "queue", w1.Token), worklease.ErrLeaseExpired,
				"the expired token is still told why after the offset is done")
		})
	}
}

// The queue scenario "Release lock on success": acknowledging removes the lock
// metadata and makes the message terminal.
func specReleaseLockOnSuccess(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithLeaseTTL(time.Minute))
	res := e.acquire("queue", 1, worklease.Acquired)
	sres, err := e.b.Succeed(e.ctx, "queue", res.Token)
	mustNoError(t, err)
	mustEqual(t, worklease.SucceedResult{Status: worklease.NoBacklog}, sres)

	mustEqual(t, worklease.DomainInfo{Processed: 1}, e.inspect("queue"), "lock metadata removed")
	leases, err := e.b.Leases(e.ctx)
	mustNoError(t, err)
	mustEmpty(t, leases)
	e.acquire("queue", 1, worklease.AlreadyProcessed)

	e.clk.Advance(time.Hour)
	exp, err := e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEmpty(t, exp, "a released lease never expires")
	e.acquire("queue", 1, worklease.AlreadyProcessed)
}

// The queue scenario "Release lock on failure": the lock metadata is cleared or
// replaced according to the failure strategy: kept with a fresh visibility
// timeout while retries remain, cleared when the message is dead-lettered.
func specReleaseLockOnFailure(t *testing.T, s *Suite) {
	const ttl = 30 * time.Second
	tests := []struct {
		name       string
		maxRetries int
		want       worklease.FailResult
		leased     bool
	}{
		{"retry keeps the lease", 5, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 1}, true},
		{"dead-letter clears it", 0, worklease.FailResult{Status: worklease.GiveUpNoBacklog}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(tt.maxRetries))
			res := e.acquire("queue", 1, worklease.Acquired)
			e.clk.Advance(10 * time.Second)
			fres, err := e.b.Fail(e.ctx, "queue", res.Token, errors.New("boom"))
			mustNoError(t, err)
			mustEqual(t, tt.want, fres)

			info := e.inspect("queue")
			mustEqual(t, tt.leased, info.Leased)
			if tt.leased {
				mustEqual(t, worklease.LeaseInfo{
					Domain: "queue", Offset: 1, Token: res.Token,
					AcquiredAt: epoch, ExpiresAt: epoch.Add(10*time.Second + ttl), RetryCount: 1,
				}, info.Lease, "lock replaced: same token, new expiry")
				mustEmpty(t, e.deadLetters("queue"))
			} else {
				mustEqual(t, worklease.LeaseInfo{}, info.Lease)
				mustLen(t, e.deadLetters("queue"), 1)
				e.acquire("queue", 1, worklease.AlreadyFailed)
			}
		})
	}
}

// The queue scenario "Retry to original queue": with mode retry and maxRetries 5, a
// message that fails while retryCount < maxRetries has its retry counter
// incremented and gets a new visibility timeout. Here the lease is kept
// under the same token, and ExpiresAt moves to a full TTL from
// each Fail.
func specRetryToOriginalQueue(t *testing.T, s *Suite) {
	const ttl = 30 * time.Second
	e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(5))
	res := e.acquire("tasks", 1, worklease.Acquired)
	for n := 1; n <= 5; n++ {
		now := e.clk.Advance(20 * time.Second) // within the TTL every time
		fres, err := e.b.Fail(e.ctx, "tasks", res.Token, fmt.Errorf("attempt %d", n))
		mustNoError(t, err)
		mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: n}, fres)

		again := e.acquire("tasks", 1, worklease.AlreadyAcquired)
		mustEqual(t, res.Token, again.Token, "lease kept")
		mustEqual(t, n, again.RetryCount, "retry counter incremented")
		mustEqual(t, now.Add(ttl), again.ExpiresAt, "new visibility timeout")
		mustEqual(t, epoch, again.AcquiredAt)
	}
	e.clk.Advance(20 * time.Second)
	fres, err := e.b.Fail(e.ctx, "tasks", res.Token, errors.New("sixth"))
	mustNoError(t, err)
	mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 5}, fres,
		"retryCount reached maxRetries")
}

// The queue scenario "Route to dead-letter queue": with mode dead-letter
// (WithMaxRetries(0)) the first failure moves the message to the dead
// letters, annotated with reason, retries and timestamp.
func specRouteToDeadLetterQueue(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(0))
	res := e.acquire("tasks", 7, worklease.Acquired)
	e.acquire("tasks", 8, worklease.Enqueued)
	now := e.clk.Advance(3 * time.Second)
	reason := errors.New("malformed payload")

	fres, err := e.b.Fail(e.ctx, "tasks", res.Token, reason)
	mustNoError(t, err)
	mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNextHint, Next: 8}, fres)
	mustEqual(t, []worklease.DeadLetter{
		{Domain: "tasks", Offset: 7, Cause: reason, Attempts: 1, At: now},
	}, e.deadLetters("tasks"))
	e.acquire("tasks", 7, worklease.AlreadyFailed)
	e.acquire("tasks", 8, worklease.Acquired)
}

// The queue scenario "Retry then dead-letter": with mode hybrid and maxRetries 3, a
// message that fails when the retry counter has reached maxRetries moves to
// the dead letters instead of being retried again.
func specRetryThenDeadLetter(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMaxRetries(3))
	res := e.acquire("tasks", 1, worklease.Acquired)
	e.acquire("tasks", 2, worklease.Enqueued)
	for n := 1; n <= 3; n++ {
		e.clk.Advance(time.Second)
		fres, err := e.b.Fail(e.ctx, "tasks", res.Token, errors.New("transient"))
		mustNoError(t, err)
		mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: n}, fres)
	}
	now := e.clk.Advance(time.Second)
	last := errors.New("still failing")
	fres, err := e.b.Fail(e.ctx, "tasks", res.Token, last)
	mustNoError(t, err)
	mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNextHint, RetryCount: 3, Next: 2}, fres)
	mustEqual(t, []worklease.DeadLetter{
		{Domain: "tasks", Offset: 1, Cause: last, Attempts: 4, At: now},
	}, e.deadLetters("tasks"), "the last failure's reason, and every attempt counted")
	mustFalse(t, e.inspect("tasks").Leased, "not requeued")
}

// The queue scenario "Renew lock before timeout": a worker holding a lock with a
// 30-second visibility timeout renews it at 20 seconds; the expiration moves
// atomically and the message stays hidden from other workers until then.
func specRenewLockBeforeTimeout(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithLeaseTTL(30*time.Second))
	res := e.acquire("queue", 1, worklease.Acquired)
	mustEqual(t, epoch.Add(30*time.Second), res.ExpiresAt)

	e.clk.Advance(epoch.Add(20 * time.Second).Sub(e.clk.Now()))
	at, err := e.b.Extend(e.ctx, "queue", res.Token, 30*time.Second)
	mustNoError(t, err)
	mustEqual(t, epoch.Add(50*time.Second), at)

	e.clk.Advance(epoch.Add(45 * time.Second).Sub(e.clk.Now())) // past the original timeout
	other := e.acquire("queue", 1, worklease.AlreadyAcquired)
	mustEqual(t, res.Token, other.Token)
	mustEqual(t, epoch.Add(50*time.Second), other.ExpiresAt)
	e.acquire("queue", 2, worklease.Enqueued)
	exp, err := e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEmpty(t, exp, "not due before the new expiration")

	e.clk.Advance(epoch.Add(50 * time.Second).Sub(e.clk.Now()))
	exp, err = e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEqual(t, []worklease.Expiry{{
		Domain: "queue", Offset: 1, Token: res.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true},
	}}, exp, "due at the new expiration")
	mustEqual(t, []int64{1, 2}, e.inspect("queue").Backlog, "back at the front, ahead of 2")
}

// The queue scenario "Prevent renewal after release": renewing a lock that was
// released by acknowledging success is rejected because it no longer exists.
func specPreventRenewalAfterRelease(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithLeaseTTL(30*time.Second))
	res := e.acquire("queue", 1, worklease.Acquired)
	e.acquire("queue", 2, worklease.Enqueued)
	_, err := e.b.Succeed(e.ctx, "queue", res.Token)
	mustNoError(t, err)

	_, err = e.b.Extend(e.ctx, "queue", res.Token, 30*time.Second)
	mustErrorIs(t, err, worklease.ErrNoLease)

	next := e.acquire("queue", 2, worklease.Acquired)
	_, err = e.b.Extend(e.ctx, "queue", res.Token, 30*time.Second)
	mustErrorIs(t, err, worklease.ErrTokenMismatch, "nor can it renew the next holder's lease")
	mustEqual(t, next.ExpiresAt, e.inspect("queue").Lease.ExpiresAt)
}

// An offset whose lease keeps expiring (a poison message that kills its
// workers) is dead-lettered after maxRetries+1 expiries, with cause
// ErrLeaseExpired, and its domain moves on to the next offset.
func specExpiryIsAFailedAttempt(t *testing.T, s *Suite) {
	const ttl = 10 * time.Second
	for _, viaReap := range []bool{true, false} {
		name := map[bool]string{true: "reaped", false: "lazily on touch"}[viaReap]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(2))
			res := e.acquire("A", 1, worklease.Acquired)
			e.acquire("A", 2, worklease.Enqueued)
			fences := []uint64{res.Token.Fence()}
			for n := 1; n <= 2; n++ {
				e.clk.Advance(ttl)
				if viaReap {
					exp, err := e.b.Reap(e.ctx)
					mustNoError(t, err)
					mustEqual(t, []worklease.Expiry{{
						Domain: "A", Offset: 1, Token: res.Token, Attempts: n, Head: worklease.Head{Next: 1, HasNext: true},
					}}, exp)
				}
				res = e.acquire("A", 1, worklease.Acquired)
				mustEqual(t, n, res.RetryCount, "RetryCount carried across re-grants")
				mustEqual(t, epoch, res.AcquiredAt, "AcquiredAt kept across re-grants")
				mustGreater(t, res.Token.Fence(), fences[len(fences)-1])
				fences = append(fences, res.Token.Fence())
			}

			now := e.clk.Advance(ttl) // the third expiry: out of retries
			if viaReap {
				exp, err := e.b.Reap(e.ctx)
				mustNoError(t, err)
				mustEqual(t, []worklease.Expiry{{
					Domain: "A", Offset: 1, Token: res.Token, Attempts: 3, DeadLettered: true, Head: worklease.Head{Next: 2, HasNext: true},
				}}, exp, "the hint moves on to the next offset")
			}
			e.acquire("A", 1, worklease.AlreadyFailed)
			dls := e.deadLetters("A")
			mustLen(t, dls, 1)
			mustErrorIs(t, dls[0].Cause, worklease.ErrLeaseExpired)
			mustEqual(t, worklease.DeadLetter{Domain: "A", Offset: 1, Cause: dls[0].Cause, Attempts: 3, At: now}, dls[0])

			_, err := e.b.Succeed(e.ctx, "A", res.Token)
			mustErrorIs(t, err, worklease.ErrLeaseExpired)
			next := e.acquire("A", 2, worklease.Acquired)
			mustEqual(t, 0, next.RetryCount)
			mustGreater(t, next.Token.Fence(), fences[len(fences)-1])
		})
	}
}

// A retry scheduled by Fail and the expiries share one attempt budget.
func specFailAndExpiryShareRetries(t *testing.T, s *Suite) {
	const ttl = 10 * time.Second
	e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(2))
	res := e.acquire("A", 1, worklease.Acquired)
	e.clk.Advance(ttl) // expiry: attempt 1 failed
	res = e.acquire("A", 1, worklease.Acquired)
	fres, err := e.b.Fail(e.ctx, "A", res.Token, nil) // attempt 2 failed
	mustNoError(t, err)
	mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 2}, fres)
	fres, err = e.b.Fail(e.ctx, "A", res.Token, nil) // attempt 3 failed: out of retries
	mustNoError(t, err)
	mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 2}, fres)
}

func specExtend(t *testing.T, s *Suite) {
	const ttl = 30 * time.Second
	tests := []struct {
		name string
		// run calls Extend (after the clock is at epoch+10s) and returns
		// what it returned; tok is the lease on "A", offset 1; other is a
		// token of domain "B".
		run     func(e *env, tok, other worklease.Token) (time.Time, error)
		wantErr error
		want    time.Time // the return value, and the lease's expiry after
	}{
		{"lengthens", func(e *env, tok, _ worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "A", tok, time.Minute)
		}, nil, epoch.Add(10*time.Second + time.Minute)},
		{"never shortens", func(e *env, tok, _ worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "A", tok, time.Second)
		}, nil, epoch.Add(ttl)},
		{"to the same expiry", func(e *env, tok, _ worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "A", tok, ttl-10*time.Second)
		}, nil, epoch.Add(ttl)},
		{"zero duration", func(e *env, tok, _ worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "A", tok, 0)
		}, worklease.ErrInvalidDuration, epoch.Add(ttl)},
		{"negative duration", func(e *env, tok, _ worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "A", tok, -time.Minute)
		}, worklease.ErrInvalidDuration, epoch.Add(ttl)},
		{"wrong token", func(e *env, _, other worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "A", other, time.Minute)
		}, worklease.ErrTokenMismatch, epoch.Add(ttl)},
		{"zero token", func(e *env, _, _ worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "A", worklease.Token{}, time.Minute)
		}, worklease.ErrTokenMismatch, epoch.Add(ttl)},
		{"unknown domain", func(e *env, tok, _ worklease.Token) (time.Time, error) {
			return e.b.Extend(e.ctx, "nobody", tok, time.Minute)
		}, worklease.ErrNoLease, epoch.Add(ttl)},
		{"repeatedly", func(e *env, tok, _ worklease.Token) (time.Time, error) {
			for range 3 {
				if _, err := e.b.Extend(e.ctx, "A", tok, time.Hour); err != nil {
					return time.Time{}, err
				}
			}
			return e.b.Extend(e.ctx, "A", tok, 2*time.Hour)
		}, nil, epoch.Add(10*time.Second + 2*time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			res := e.acquire("A", 1, worklease.Acquired)
			other := e.acquire("B", 1, worklease.Acquired)
			e.clk.Advance(10 * time.Second)

			at, err := tt.run(e, res.Token, other.Token)
			if tt.wantErr != nil {
				mustErrorIs(t, err, tt.wantErr)
				mustZero(t, at)
			} else {
				mustNoError(t, err)
				mustEqual(t, tt.want, at)
			}
			info := e.inspect("A")
			mustEqual(t, tt.want, info.Lease.ExpiresAt)
			mustEqual(t, res.Token, info.Lease.Token)
		})
	}
}

// Without WithLeaseTTL leases never expire: Extend checks the token and
// returns the zero time.
func specExtendWithoutTTL(t *testing.T, s *Suite) {
	e := s.start(t)
	res := e.acquire("A", 1, worklease.Acquired)
	mustZero(t, res.ExpiresAt)

	at, err := e.b.Extend(e.ctx, "A", res.Token, time.Minute)
	mustNoError(t, err)
	mustZero(t, at)
	_, err = e.b.Extend(e.ctx, "A", worklease.Token{}, time.Minute)
	mustErrorIs(t, err, worklease.ErrTokenMismatch)
	_, err = e.b.Extend(e.ctx, "A", res.Token, 0)
	mustErrorIs(t, err, worklease.ErrInvalidDuration)

	e.clk.Advance(1000 * time.Hour)
	info := e.inspect("A")
	mustTrue(t, info.Leased)
	mustZero(t, info.Lease.ExpiresAt)
	exp, err := e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEmpty(t, exp, "Reap with no TTL returns nothing")
	_, err = e.b.Succeed(e.ctx, "A", res.Token)
	mustNoError(t, err)
}

// Without WithLeaseTTL nothing ever expires, so Reap returns nothing.
func specReapWithoutTTL(t *testing.T, s *Suite) {
	e := s.start(t)
	e.acquire("A", 1, worklease.Acquired)
	e.acquire("B", 1, worklease.Acquired)
	e.clk.Advance(24 * 365 * time.Hour)
	exp, err := e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEmpty(t, exp)
	leases, err := e.b.Leases(e.ctx)
	mustNoError(t, err)
	mustLen(t, leases, 2)
}

// Extend exactly at the expiry is too late: the lease ran out.
func specExtendAtExpiryIsTooLate(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithLeaseTTL(time.Second))
	res := e.acquire("A", 1, worklease.Acquired)
	e.clk.Advance(time.Second)
	_, err := e.b.Extend(e.ctx, "A", res.Token, time.Minute)
	mustErrorIs(t, err, worklease.ErrLeaseExpired)
	info := e.inspect("A")
	mustFalse(t, info.Leased)
	mustEqual(t, []int64{1}, info.Backlog)
}

// Reap returns exactly the expired leases, sorted by domain, and leaves
// unexpired and extended ones alone. A lease already revoked by a touch is
// not reported again.
func specReap(t *testing.T, s *Suite) {
	const ttl = 30 * time.Second
	e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(1))

	// "poison" expires once before the round under test, so this expiry is
	// its last attempt.
	poison := e.acquire("poison", 5, worklease.Acquired)
	e.acquire("poison", 6, worklease.Enqueued)
	e.clk.Advance(ttl)
	exp, err := e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEqual(t, []worklease.Expiry{{Domain: "poison", Offset: 5, Token: poison.Token, Attempts: 1, Head: worklease.Head{Next: 5, HasNext: true}}}, exp)
	start := e.clk.Now()
	poison = e.acquire("poison", 5, worklease.Acquired)

	c := e.acquire("c", 1, worklease.Acquired) // expires at start+30s
	e.acquire("c", 2, worklease.Enqueued)
	a := e.acquire("a", 3, worklease.Acquired)
	extended := e.acquire("extended", 1, worklease.Acquired)
	touched := e.acquire("touched", 1, worklease.Acquired)
	e.clk.Advance(10 * time.Second)
	late := e.acquire("late", 1, worklease.Acquired) // expires at start+40s
	_, err = e.b.Extend(e.ctx, "extended", extended.Token, time.Minute)
	mustNoError(t, err)
	done := e.acquire("done", 1, worklease.Acquired)
	_, err = e.b.Succeed(e.ctx, "done", done.Token)
	mustNoError(t, err)

	e.clk.Advance(start.Add(ttl).Sub(e.clk.Now()))
	mustEqual(t, []int64{1}, e.inspect("touched").Backlog, "revoked lazily by the touch")
	_, err = e.b.Succeed(e.ctx, "touched", touched.Token)
	mustErrorIs(t, err, worklease.ErrLeaseExpired)

	exp, err = e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEqual(t, []worklease.Expiry{
		{Domain: "a", Offset: 3, Token: a.Token, Attempts: 1, Head: worklease.Head{Next: 3, HasNext: true}},
		{Domain: "c", Offset: 1, Token: c.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}},
		{Domain: "poison", Offset: 5, Token: poison.Token, Attempts: 2, DeadLettered: true, Head: worklease.Head{Next: 6, HasNext: true}},
	}, exp)
	for _, d := range []string{"a", "c", "poison", "touched"} {
		mustFalse(t, e.inspect(d).Leased, d)
	}
	for _, d := range []string{"late", "extended"} {
		mustTrue(t, e.inspect(d).Leased, d)
	}

	exp, err = e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEmpty(t, exp, "each expiry is reported once")

	e.clk.Advance(start.Add(40 * time.Second).Sub(e.clk.Now()))
	exp, err = e.b.Reap(e.ctx)
	mustNoError(t, err)
	mustEqual(t, []worklease.Expiry{{Domain: "late", Offset: 1, Token: late.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}}}, exp)
}

// Succeed, Fail and Extend check, in this order: Extend's duration; a
// domain the backend does not know (ErrNoLease); the lease's expiry, which
// revokes it if due; the current lease's token (success); the domain's
// latest revoked token (ErrLeaseExpired or ErrLeaseRevoked, whether the
// domain is idle or leased again); no lease (ErrNoLease); any other token
// (ErrTokenMismatch). Only the latest revoked token is told why: an older
// one is just stale.
func specTokenCheckOrder(t *testing.T, s *Suite) {
	const ttl = time.Minute
	tests := []struct {
		name string
		// setup leaves domain "A" in the state to test and returns the
		// token to pass.
		setup func(t *testing.T, e *env) worklease.Token
		want  error
	}{
		{"unknown domain", func(t *testing.T, e *env) worklease.Token {
			return e.acquire("B", 1, worklease.Acquired).Token
		}, worklease.ErrNoLease},
		{"expired, idle", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(ttl)
			mustFalse(t, e.inspect("A").Leased)
			return tok
		}, worklease.ErrLeaseExpired},
		{"expired, leased again", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(ttl)
			e.acquire("A", 1, worklease.Acquired)
			return tok
		}, worklease.ErrLeaseExpired},
		{"force-released, idle", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			_, err := e.b.ForceRelease(e.ctx, "A")
			mustNoError(t, err)
			return tok
		}, worklease.ErrLeaseRevoked},
		{"killed, leased again", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			_, err := e.b.Kill(e.ctx, "A", 1, "stuck")
			mustNoError(t, err)
			e.acquire("A", 2, worklease.Acquired)
			return tok
		}, worklease.ErrLeaseRevoked},
		{"older revoked, idle", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(ttl)
			e.acquire("A", 1, worklease.Acquired)
			_, err := e.b.ForceRelease(e.ctx, "A")
			mustNoError(t, err)
			return tok
		}, worklease.ErrNoLease},
		{"older revoked, leased again", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(ttl)
			e.acquire("A", 1, worklease.Acquired)
			_, err := e.b.ForceRelease(e.ctx, "A")
			mustNoError(t, err)
			e.acquire("A", 1, worklease.Acquired)
			return tok
		}, worklease.ErrTokenMismatch},
		{"zero token, idle after a revoke", func(t *testing.T, e *env) worklease.Token {
			e.acquire("A", 1, worklease.Acquired)
			_, err := e.b.ForceRelease(e.ctx, "A")
			mustNoError(t, err)
			return worklease.Token{}
		}, worklease.ErrNoLease},
		{"finished, idle", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			_, err := e.b.Succeed(e.ctx, "A", tok)
			mustNoError(t, err)
			return tok
		}, worklease.ErrNoLease},
		{"finished, leased again", func(t *testing.T, e *env) worklease.Token {
			tok := e.acquire("A", 1, worklease.Acquired).Token
			_, err := e.b.Succeed(e.ctx, "A", tok)
			mustNoError(t, err)
			e.acquire("A", 2, worklease.Acquired)
			return tok
		}, worklease.ErrTokenMismatch},
	}
	for _, tt := range tests {
		for _, call := range staleCalls {
			t.Run(tt.name+"/"+call.name, func(t *testing.T) {
				t.Parallel()
				e := s.start(t, worklease.WithLeaseTTL(ttl))
				tok := tt.setup(t, e)
				before := e.inspect("A")
				err := call.call(e, "A", tok)
				mustSentinel(t, tt.want, err)
				mustEqual(t, before, e.inspect("A"), "a refused call changes nothing")
				if call.name == "Extend" {
					_, err := e.b.Extend(e.ctx, "A", tok, 0)
					mustErrorIs(t, err, worklease.ErrInvalidDuration, "the duration is checked first")
				}
			})
		}
	}
}
