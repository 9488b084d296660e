package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// testScenarios is the Scenarios area: the protocol's sanity scenarios.
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
