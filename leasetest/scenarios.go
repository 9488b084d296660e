package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// testScenarios is the Scenarios area: the protocol's basic scenarios, one
// domain driven through TryAcquire, Succeed and Fail.
func testScenarios(t *testing.T, s *Suite) {
	runCases(t, s, []testCase{
		{"HappyPath", func(t *testing.T, s *Suite) {
			e := s.start(t)
			res := e.acquire("A", 1, worklease.Acquired)
			mustEqual(t, worklease.AcquireResult{Status: worklease.Acquired, Token: res.Token, AcquiredAt: epoch}, res)
			mustEqual(t, worklease.SucceedResult{Status: worklease.NoBacklog}, e.succeed("A", res.Token))
			mustEqual(t, worklease.DomainInfo{Processed: 1}, e.inspect("A"))
			e.acquire("A", 1, worklease.AlreadyProcessed)
		}},
		{"QueueThenHandOff", func(t *testing.T, s *Suite) {
			e := s.start(t)
			t1 := e.acquire("A", 1, worklease.Acquired).Token
			mustEqual(t, worklease.AcquireResult{Status: worklease.Enqueued}, e.acquire("A", 2, worklease.Enqueued))
			mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, e.succeed("A", t1))
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{2}, Processed: 1}, e.inspect("A"))
			t2 := e.acquire("A", 2, worklease.Acquired).Token
			mustTrue(t, t2.Fence() > t1.Fence(), "fence %d after %d", t2.Fence(), t1.Fence())
			mustTrue(t, t2 != t1, "the same token twice")
			mustEqual(t, worklease.DomainInfo{Leased: true, Lease: worklease.LeaseInfo{Domain: "A", Offset: 2, Token: t2, AcquiredAt: epoch}, Processed: 1}, e.inspect("A"))
		}},
		{"OutOfOrderAcquire", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			e.succeed("A", tok)
			e.refused(worklease.ErrBacklogOrder, func() error { _, err := e.b.TryAcquire(e.ctx, "A", 3); return err })
			_, err := e.b.TryAcquire(e.ctx, "A", 4)
			var boe *worklease.BacklogOrderError
			mustTrue(t, errors.As(err, &boe), "%v is no *BacklogOrderError", err)
			mustEqual(t, worklease.BacklogOrderError{Domain: "A", Expected: 2, Got: 4}, *boe)
			e.acquire("A", 2, worklease.Acquired)
		}},
		{"Retry", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(2))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 1}, e.fail("A", tok, errors.New("boom")))
			res := e.acquire("A", 1, worklease.AlreadyAcquired)
			mustEqual(t, worklease.AcquireResult{Status: worklease.AlreadyAcquired, Token: tok, AcquiredAt: epoch, RetryCount: 1}, res)
			mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 2}, e.fail("A", tok, nil))
			mustEqual(t, worklease.SucceedResult{Status: worklease.NoBacklog}, e.succeed("A", tok))
			mustEqual(t, worklease.DomainInfo{Processed: 1}, e.inspect("A"))
		}},
		{"FinalGiveUp", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(1))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.fail("A", tok, errors.New("first"))
			e.acquire("A", 2, worklease.Enqueued)
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNextHint, RetryCount: 1, Next: 2}, e.fail("A", tok, errors.New("last")))
			mustEqual(t, []worklease.DeadLetter{{Domain: "A", Offset: 1, Cause: errors.New("last"), Attempts: 2, At: epoch}}, e.deadLetters("A"))
			e.acquire("A", 1, worklease.AlreadyFailed)
			tok = e.acquire("A", 2, worklease.Acquired).Token
			e.fail("A", tok, nil)
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 1}, e.fail("A", tok, nil))
			mustEqual(t, worklease.DomainInfo{Failed: 2}, e.inspect("A"))
		}},
		{"DefaultMaxRetries", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			for i := 1; i <= worklease.DefaultMaxRetries; i++ {
				mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: i}, e.fail("A", tok, nil))
			}
			mustEqual(t, worklease.GiveUpNoBacklog, e.fail("A", tok, nil).Status)
		}},
		{"Idempotence", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			mustEqual(t, worklease.AcquireResult{Status: worklease.AlreadyAcquired, Token: tok, AcquiredAt: epoch}, e.acquire("A", 1, worklease.AlreadyAcquired))
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 2, worklease.Enqueued) // once, however many times
			e.acquire("A", 3, worklease.Enqueued)
			mustEqual(t, []int64{2, 3}, e.inspect("A").Backlog)
			e.succeed("A", tok)
			e.acquire("A", 1, worklease.AlreadyProcessed)
			tok = e.acquire("A", 2, worklease.Acquired).Token
			e.fail("A", tok, nil)
			e.acquire("A", 2, worklease.AlreadyFailed)
			e.acquire("A", 1, worklease.AlreadyProcessed)
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{3}, Processed: 1, Failed: 1}, e.inspect("A"))
		}},
		{"IdleAcquireNeedsNoOrder", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.succeed("A", e.acquire("A", 7, worklease.Acquired).Token)
			e.succeed("A", e.acquire("A", 3, worklease.Acquired).Token)
			e.acquire("A", 9, worklease.Acquired)
		}},
		{"DomainsAreIndependent", func(t *testing.T, s *Suite) {
			e := s.start(t)
			a := e.acquire("A", 1, worklease.Acquired).Token
			b := e.acquire("B", 1, worklease.Acquired).Token
			mustTrue(t, a != b, "two domains got the same token")
			_, err := e.b.Succeed(e.ctx, "A", b)
			mustSentinel(t, worklease.ErrTokenMismatch, err, "Succeed(A) with B's token")
			e.succeed("B", b)
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("B", 2, worklease.Acquired)
		}},
		{"FencesGrow", func(t *testing.T, s *Suite) {
			e := s.start(t)
			var last uint64
			seen := map[worklease.Token]bool{}
			for off := range int64(20) {
				tok := e.acquire("A", off, worklease.Acquired).Token
				mustTrue(t, tok.Fence() > last, "fence %d after %d", tok.Fence(), last)
				mustFalse(t, seen[tok], "token %v granted twice", tok)
				last, seen[tok] = tok.Fence(), true
				if off%2 == 0 {
					e.succeed("A", tok)
				} else {
					e.forceRelease("A")
					e.kill("A", off, "")
				}
			}
		}},
		{"TokensUniqueAcrossBackends", func(t *testing.T, s *Suite) {
			e1, e2 := s.start(t), s.start(t)
			t1 := e1.acquire("A", 1, worklease.Acquired).Token
			t2 := e2.acquire("A", 1, worklease.Acquired).Token
			mustTrue(t, t1 != t2, "two backends granted the same token %v", t1)
			_, err := e2.b.Succeed(e2.ctx, "A", t1)
			mustSentinel(t, worklease.ErrTokenMismatch, err, "Succeed with the other backend's token")
		}},
		{"SucceedNext", func(t *testing.T, s *Suite) {
			e := s.start(t)
			t1 := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			res := e.succeedNext("A", t1)
			t2 := res.Lease.Token
			mustEqual(t, worklease.SucceedResult{Status: worklease.NextAcquired, Lease: worklease.LeaseInfo{Domain: "A", Offset: 2, Token: t2, AcquiredAt: epoch}}, res)
			mustTrue(t, t2.Fence() > t1.Fence(), "fence %d after %d", t2.Fence(), t1.Fence())
			e.acquire("A", 3, worklease.Enqueued) // no gap: queued, not refused
			e.acquire("A", 2, worklease.AlreadyAcquired)
			res = e.succeedNext("A", t2)
			mustEqual(t, worklease.NextAcquired, res.Status)
			mustEqual(t, int64(3), res.Lease.Offset)
			mustEqual(t, worklease.SucceedResult{Status: worklease.NoBacklog}, e.succeedNext("A", res.Lease.Token))
			mustEqual(t, worklease.DomainInfo{Processed: 3}, e.inspect("A"))
		}},
		{"FailNext", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(1))
			t1 := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			mustEqual(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 1}, e.failNext("A", t1, nil))
			res := e.failNext("A", t1, errors.New("last"))
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNextAcquired, RetryCount: 1,
				Lease: worklease.LeaseInfo{Domain: "A", Offset: 2, Token: res.Lease.Token, AcquiredAt: epoch}}, res)
			e.fail("A", res.Lease.Token, nil)
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 1}, e.failNext("A", res.Lease.Token, nil))
			mustEqual(t, worklease.DomainInfo{Failed: 2}, e.inspect("A"))
		}},
		{"SucceedNextPaused", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.pause("A")
			mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, e.succeedNext("A", tok))
			e.acquire("A", 2, worklease.Enqueued)
			mustEqual(t, worklease.Head{Next: 2, HasNext: true}, e.resume("A"))
			tok = e.acquire("A", 2, worklease.Acquired).Token
			e.acquire("A", 3, worklease.Enqueued)
			e.pause("A")
			mustEqual(t, worklease.FailResult{Status: worklease.GiveUpParked}, e.failNext("A", tok, nil))
		}},
		{"AcquiredAtIsGrantTime", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.clk.Advance(time.Hour)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(time.Minute)
			e.acquire("A", 2, worklease.Enqueued)
			e.succeed("A", tok)
			mustEqual(t, epoch.Add(time.Hour+time.Minute), e.acquire("A", 2, worklease.Acquired).AcquiredAt, "AcquiredAt of a queued offset")
		}},
		{"InspectIsACopy", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("A", 4, worklease.Acquired).Token
			e.fail("A", tok, nil)
			e.acquire("A", 6, worklease.Enqueued)
			e.acquire("A", 5, worklease.Enqueued)
			info := e.inspect("A")
			mustEqual(t, worklease.DomainInfo{Leased: true, Lease: worklease.LeaseInfo{Domain: "A", Offset: 4, Token: tok, AcquiredAt: epoch, RetryCount: 1},
				Backlog: []int64{6, 5}}, info)
			info.Backlog[0] = 99 // a copy: changing it changes nothing
			mustEqual(t, []int64{6, 5}, e.inspect("A").Backlog)
		}},
		{"InspectUnknownDomain", func(t *testing.T, s *Suite) {
			e := s.start(t)
			mustEqual(t, worklease.DomainInfo{}, e.inspect("nobody"))
			mustEqual(t, 0, len(e.domains()), "Inspect made a domain")
		}},
	}, handoffSpecCases)
}

// handoffSpecCases are the area's cases that came from the root package's tests.
var handoffSpecCases = []testCase{
	{"SucceedNextLeavesNoHandOffGap", specSucceedNextLeavesNoHandOffGap},
	{"SucceedNextResults", specSucceedNextResults},
	{"FailNextResults", specFailNextResults},
	{"SucceedNextFailNextExpired", specSucceedNextFailNextExpired},
	{"SucceedNextFailNextClosed", specSucceedNextFailNextClosed},
}

// specSucceedNextLeavesNoHandOffGap is the problem SucceedNext solves.
// Between Succeed's hint and the TryAcquire that follows it, the domain is
// idle with a backlog, and an event arriving then is refused with
// ErrBacklogOrder: an orchestrator that drops that error drops the event.
// SucceedNext leaves no such window: the event is queued.
func specSucceedNextLeavesNoHandOffGap(t *testing.T, s *Suite) {
	e := s.start(t)

	// Succeed, then a new event before the hint is followed.
	first := e.acquire("succeed", 1, worklease.Acquired)
	e.acquire("succeed", 2, worklease.Enqueued)
	res, err := e.b.Succeed(e.ctx, "succeed", first.Token)
	mustNoError(t, err)
	mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, res)
	_, err = e.b.TryAcquire(e.ctx, "succeed", 3)
	mustErrorIs(t, err, worklease.ErrBacklogOrder)

	// SucceedNext, then the same new event.
	a := e.acquire("next", 1, worklease.Acquired)
	e.acquire("next", 2, worklease.Enqueued)
	res, err = e.b.SucceedNext(e.ctx, "next", a.Token)
	mustNoError(t, err)
	mustEqual(t, worklease.NextAcquired, res.Status)
	mustEqual(t, int64(2), res.Lease.Offset)
	e.acquire("next", 3, worklease.Enqueued)

	// The same with FailNext giving up.
	e0 := s.start(t, worklease.WithMaxRetries(0))
	f := e0.acquire("next", 1, worklease.Acquired)
	e0.acquire("next", 2, worklease.Enqueued)
	fres, err := e0.b.FailNext(e0.ctx, "next", f.Token, errors.New("boom"))
	mustNoError(t, err)
	mustEqual(t, worklease.GiveUpNextAcquired, fres.Status)
	mustEqual(t, int64(2), fres.Lease.Offset)
	e0.acquire("next", 3, worklease.Enqueued)
}

// specSucceedNextResults checks every status SucceedNext returns, and the
// state it leaves.
func specSucceedNextResults(t *testing.T, s *Suite) {
	const ttl = time.Minute
	tests := []struct {
		name    string
		opts    []worklease.Option
		setup   func(t *testing.T, e *env) worklease.Token // returns the token to succeed with, on "A"
		want    worklease.SucceedResult                    // Lease.Token is checked apart
		backlog []int64                                    // after the call
		leased  bool
	}{
		{
			name: "empty backlog",
			setup: func(t *testing.T, e *env) worklease.Token {
				return e.acquire("A", 1, worklease.Acquired).Token
			},
			want: worklease.SucceedResult{Status: worklease.NoBacklog},
		},
		{
			name: "backlog",
			setup: func(t *testing.T, e *env) worklease.Token {
				tok := e.acquire("A", 1, worklease.Acquired).Token
				e.acquire("A", 2, worklease.Enqueued)
				e.acquire("A", 3, worklease.Enqueued)
				return tok
			},
			want: worklease.SucceedResult{Status: worklease.NextAcquired, Lease: worklease.LeaseInfo{
				Domain: "A", Offset: 2, AcquiredAt: epoch.Add(time.Second),
			}},
			backlog: []int64{3},
			leased:  true,
		},
		{
			name: "backlog with a lease TTL",
			opts: []worklease.Option{worklease.WithLeaseTTL(ttl)},
			setup: func(t *testing.T, e *env) worklease.Token {
				tok := e.acquire("A", 1, worklease.Acquired).Token
				e.acquire("A", 2, worklease.Enqueued)
				return tok
			},
			want: worklease.SucceedResult{Status: worklease.NextAcquired, Lease: worklease.LeaseInfo{
				Domain: "A", Offset: 2, AcquiredAt: epoch.Add(time.Second), ExpiresAt: epoch.Add(time.Second + ttl),
			}},
			leased: true,
		},
		{
			name: "LIFO grants the newest",
			opts: []worklease.Option{worklease.WithOrdering(worklease.LIFO)},
			setup: func(t *testing.T, e *env) worklease.Token {
				tok := e.acquire("A", 1, worklease.Acquired).Token
				e.acquire("A", 2, worklease.Enqueued)
				e.acquire("A", 3, worklease.Enqueued)
				return tok
			},
			want: worklease.SucceedResult{Status: worklease.NextAcquired, Lease: worklease.LeaseInfo{
				Domain: "A", Offset: 3, AcquiredAt: epoch.Add(time.Second),
			}},
			backlog: []int64{2},
			leased:  true,
		},
		{
			// Offset 1 failed once and was force-released; offset 2 was
			// then granted out of turn. The grant of 1 carries its attempt
			// and its first grant's time.
			name: "carried attempts",
			opts: []worklease.Option{worklease.WithBestEffortOrdering()},
			setup: func(t *testing.T, e *env) worklease.Token {
				tok := e.acquire("A", 1, worklease.Acquired).Token
				e.acquire("A", 2, worklease.Enqueued)
				_, err := e.b.Fail(e.ctx, "A", tok, errors.New("boom"))
				mustNoError(t, err)
				_, err = e.b.ForceRelease(e.ctx, "A")
				mustNoError(t, err)
				return e.acquire("A", 2, worklease.Acquired).Token
			},
			want: worklease.SucceedResult{Status: worklease.NextAcquired, Lease: worklease.LeaseInfo{
				Domain: "A", Offset: 1, AcquiredAt: epoch, RetryCount: 1,
			}},
			leased: true,
		},
		{
			name: "paused",
			setup: func(t *testing.T, e *env) worklease.Token {
				tok := e.acquire("A", 1, worklease.Acquired).Token
				e.acquire("A", 2, worklease.Enqueued)
				mustNoError(t, e.b.Pause(e.ctx, "A"))
				return tok
			},
			want:    worklease.SucceedResult{Status: worklease.NextHint, Next: 2},
			backlog: []int64{2},
		},
		{
			name: "paused, empty backlog",
			setup: func(t *testing.T, e *env) worklease.Token {
				tok := e.acquire("A", 1, worklease.Acquired).Token
				mustNoError(t, e.b.Pause(e.ctx, "A"))
				return tok
			},
			want: worklease.SucceedResult{Status: worklease.NoBacklog},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, tt.opts...)
			tok := tt.setup(t, e)
			before := e.inspect("A")
			e.clk.Advance(time.Second)

			got, err := e.b.SucceedNext(e.ctx, "A", tok)
			mustNoError(t, err)
			want := tt.want
			want.Lease.Token = got.Lease.Token
			mustEqual(t, want, got)

			info := e.inspect("A")
			mustEqual(t, before.Processed+1, info.Processed, "the offset is processed")
			mustEqual(t, tt.backlog, info.Backlog)
			mustEqual(t, tt.leased, info.Leased)
			if !tt.leased {
				mustTrue(t, got.Lease.Token.IsZero())
				return
			}
			mustEqual(t, got.Lease, info.Lease, "Lease describes the lease now held")
			mustGreater(t, got.Lease.Token.Fence(), tok.Fence(), "a new token with a higher fence")
			// It is the caller's lease: it finishes it, and the offset is
			// never granted again.
			e.acquire("A", got.Lease.Offset, worklease.AlreadyAcquired)
			_, err = e.b.Succeed(e.ctx, "A", got.Lease.Token)
			mustNoError(t, err)
			e.acquire("A", got.Lease.Offset, worklease.AlreadyProcessed)
		})
	}
}

// specFailNextResults checks every status FailNext returns, and the state
// it leaves.
func specFailNextResults(t *testing.T, s *Suite) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		opts    []worklease.Option
		pause   bool // Pause "A" before FailNext
		backlog bool // offset 2 queued behind offset 1
		want    worklease.FailResult
		leased  int64 // the offset leased afterwards; -1: none
		paused  bool
	}{
		{
			name:    "retry",
			opts:    []worklease.Option{worklease.WithMaxRetries(1)},
			backlog: true,
			want:    worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 1},
			leased:  1,
		},
		{
			name:   "give up, empty backlog",
			want:   worklease.FailResult{Status: worklease.GiveUpNoBacklog},
			leased: -1,
		},
		{
			name:    "give up, backlog",
			backlog: true,
			want: worklease.FailResult{Status: worklease.GiveUpNextAcquired, Lease: worklease.LeaseInfo{
				Domain: "A", Offset: 2, AcquiredAt: epoch.Add(time.Second),
			}},
			leased: 2,
		},
		{
			name:    "give up after retries, backlog",
			opts:    []worklease.Option{worklease.WithMaxRetries(2)},
			backlog: true,
			want: worklease.FailResult{Status: worklease.GiveUpNextAcquired, RetryCount: 2, Lease: worklease.LeaseInfo{
				Domain: "A", Offset: 2, AcquiredAt: epoch.Add(time.Second),
			}},
			leased: 2,
		},
		{
			name:    "give up while paused",
			pause:   true,
			backlog: true,
			want:    worklease.FailResult{Status: worklease.GiveUpParked},
			leased:  -1,
			paused:  true,
		},
		{
			name:    "give up, parked",
			opts:    []worklease.Option{worklease.WithParkOnDeadLetter()},
			backlog: true,
			want:    worklease.FailResult{Status: worklease.GiveUpParked},
			leased:  -1,
			paused:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, append([]worklease.Option{worklease.WithMaxRetries(0)}, tt.opts...)...)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			if tt.backlog {
				e.acquire("A", 2, worklease.Enqueued)
			}
			if tt.pause {
				mustNoError(t, e.b.Pause(e.ctx, "A"))
			}
			// Use up the retries first, with Fail.
			for range tt.want.RetryCount {
				if tt.want.Status == worklease.RetryScheduled {
					break
				}
				res, err := e.b.Fail(e.ctx, "A", tok, boom)
				mustNoError(t, err)
				mustEqual(t, worklease.RetryScheduled, res.Status)
			}
			e.clk.Advance(time.Second)

			got, err := e.b.FailNext(e.ctx, "A", tok, boom)
			mustNoError(t, err)
			want := tt.want
			want.Lease.Token = got.Lease.Token
			mustEqual(t, want, got)

			info := e.inspect("A")
			mustEqual(t, tt.paused, info.Paused)
			if tt.want.Status != worklease.RetryScheduled {
				dls := e.deadLetters("A")
				mustLen(t, dls, 1)
				mustEqual(t, int64(1), dls[0].Offset)
				mustEqual(t, boom.Error(), dls[0].Cause.Error(), "the dead letter's cause, by its text")
				mustEqual(t, tt.want.RetryCount+1, dls[0].Attempts)
			}
			if tt.leased < 0 {
				mustFalse(t, info.Leased)
				mustTrue(t, got.Lease.Token.IsZero())
				return
			}
			mustTrue(t, info.Leased)
			mustEqual(t, tt.leased, info.Lease.Offset)
			if tt.want.Status == worklease.RetryScheduled {
				mustEqual(t, tok, info.Lease.Token, "a retry keeps the lease")
				mustEqual(t, []int64{2}, info.Backlog)
				return
			}
			mustEqual(t, got.Lease, info.Lease, "Lease describes the lease now held")
			mustGreater(t, got.Lease.Token.Fence(), tok.Fence())
			mustEmpty(t, info.Backlog)
		})
	}
}

// specSucceedNextFailNextExpired: a lease that ran out of time is revoked
// by SucceedNext and FailNext as by any call, which then return
// ErrLeaseExpired and grant nothing.
func specSucceedNextFailNextExpired(t *testing.T, s *Suite) {
	for _, name := range []string{"SucceedNext", "FailNext"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := s.start(t, worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(1))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.clk.Advance(time.Minute)
			var err error
			if name == "SucceedNext" {
				_, err = e.b.SucceedNext(e.ctx, "A", tok)
			} else {
				_, err = e.b.FailNext(e.ctx, "A", tok, nil)
			}
			mustErrorIs(t, err, worklease.ErrLeaseExpired)
			info := e.inspect("A")
			mustFalse(t, info.Leased)
			mustEqual(t, []int64{1, 2}, info.Backlog, "the expired offset is back at the front")
		})
	}
}

func specSucceedNextFailNextClosed(t *testing.T, s *Suite) {
	e := s.start(t)
	tok := e.acquire("A", 1, worklease.Acquired).Token
	mustNoError(t, e.b.Close())
	_, err := e.b.SucceedNext(e.ctx, "A", tok)
	mustErrorIs(t, err, worklease.ErrClosed)
	_, err = e.b.FailNext(e.ctx, "A", tok, nil)
	mustErrorIs(t, err, worklease.ErrClosed)
}
