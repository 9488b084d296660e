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
