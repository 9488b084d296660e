package leasetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// testPull is the Pull area: the pull calls. Producers store offsets with
// Enqueue, which never grants; workers lease the heads of ready domains
// with Claim and WaitClaim, the longest waiting first, and end them with
// Succeed, SucceedMany or Retry, which lets an offset wait out a delay at
// the front of its domain's line. The cases that store payloads are
// skipped unless Suite.Payloads.
//
// Domains that become ready at the same instant may be claimed in any
// order, so the cases move the clock on between the calls whose order
// they check.
func testPull(t *testing.T, s *Suite) {
	runCases(t, s, []testCase{
		{"EnqueueNeverGrants", func(t *testing.T, s *Suite) {
			s.need(t, FeatureDuplicates)
			e := s.start(t)
			e.enqueue("A", 1, nil, worklease.Enqueued)
			e.enqueue("A", 1, nil, worklease.AlreadyQueued) // stored once
			e.enqueue("A", 2, nil, worklease.Enqueued)
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{1, 2}}, e.inspect("A"))
			mustEqual(t, 0, len(e.leases()), "leases after Enqueue")
			mustEqual(t, []string{"A"}, e.domains())
			e.pause("P")
			e.enqueue("P", 1, nil, worklease.Enqueued)
			mustEqual(t, worklease.DomainInfo{Paused: true, Backlog: []int64{1}}, e.inspect("P"))
		}},
		{"EnqueueStatuses", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.enqueue("A", 1, nil, worklease.AlreadyAcquired)
			e.succeed("A", tok)
			e.enqueue("A", 1, nil, worklease.AlreadyProcessed)
			e.kill("A", 5, "poison")
			e.enqueue("A", 5, nil, worklease.AlreadyFailed)
			mustEqual(t, worklease.DomainInfo{Processed: 1, Failed: 1}, e.inspect("A"))
			e.refused(worklease.ErrInvalidOffset, func() error { _, err := e.b.Enqueue(e.ctx, "A", -1, nil); return err }, "B")
			e.refused(worklease.ErrInvalidDomain, func() error { _, err := e.b.Enqueue(e.ctx, "", 1, nil); return err })
			e2 := s.start(t, worklease.WithMonotonicOffsets())
			e2.enqueue("A", 4, nil, worklease.Enqueued)
			e2.process("A", 4)
			e2.enqueue("A", 2, nil, worklease.AlreadyProcessed)
		}},
		{"ClaimInOrder", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.enqueue("a", 2, nil, worklease.Enqueued)
			e.clk.Advance(time.Millisecond) // b is ready after a
			e.enqueue("b", 7, nil, worklease.Enqueued)
			e.clk.Advance(time.Second)
			cs := e.claim(10, "a/1@1", "b/7@1")
			now := e.clk.Now()
			for _, c := range cs {
				mustTrue(t, c.ExpiresAt.Equal(now.Add(time.Minute)), "%s/%d: ExpiresAt %v, want %v", c.Domain, c.Offset, c.ExpiresAt, now.Add(time.Minute))
				mustEqual(t, []worklease.LeaseInfo{{Domain: c.Domain, Offset: c.Offset, Token: c.Token, AcquiredAt: now, ExpiresAt: c.ExpiresAt}},
					e.leasesOf(c.Domain), "%s's lease", c.Domain)
			}
			e.claim(10) // both are leased
			e.succeed("a", cs[0].Token)
			cs2 := e.claim(10, "a/2@1")
			mustTrue(t, cs2[0].Token.Fence() > cs[0].Token.Fence(), "fence %d after %d", cs2[0].Token.Fence(), cs[0].Token.Fence())
			e.succeed("a", cs2[0].Token)
			e.succeed("b", cs[1].Token)
			e.claim(10) // nothing queued
			mustEqual(t, worklease.DomainInfo{Processed: 2}, e.inspect("a"))
		}},
		{"ClaimLIFO", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithOrdering(worklease.LIFO))
			for off := range int64(3) {
				e.enqueue("A", off, nil, worklease.Enqueued)
			}
			for _, want := range []string{"A/2@1", "A/1@1", "A/0@1"} {
				e.succeed("A", e.claim(5, want)[0].Token)
			}
		}},
		{"RoundRobin", func(t *testing.T, s *Suite) {
			// One deep backlog does not starve the others: a domain whose
			// offset just finished waits behind those ready before it.
			e := s.start(t)
			for off := range int64(6) {
				e.enqueue("deep", off, nil, worklease.Enqueued)
			}
			for _, d := range []string{"x", "y"} {
				e.clk.Advance(time.Millisecond)
				e.enqueue(d, 0, nil, worklease.Enqueued)
				e.enqueue(d, 1, nil, worklease.Enqueued)
			}
			var got []string
			for range 10 {
				e.clk.Advance(time.Millisecond)
				cs := e.claimAny(1)
				mustEqual(t, 1, len(cs), "claims after %v", got)
				got = append(got, fmt.Sprintf("%s/%d", cs[0].Domain, cs[0].Offset))
				e.succeed(cs[0].Domain, cs[0].Token)
			}
			mustEqual(t, []string{"deep/0", "x/0", "y/0", "deep/1", "x/1", "y/1", "deep/2", "deep/3", "deep/4", "deep/5"}, got)
		}},
		{"RoundRobinBatches", func(t *testing.T, s *Suite) {
			e := s.start(t)
			for off := range int64(4) {
				e.enqueue("deep", off, nil, worklease.Enqueued)
			}
			e.clk.Advance(time.Millisecond)
			e.enqueue("x", 0, nil, worklease.Enqueued)
			e.enqueue("x", 1, nil, worklease.Enqueued)
			// Domains that SucceedMany makes ready together are ready at
			// the same instant: their order is free.
			for _, want := range [][]string{{"deep/0@1", "x/0@1"}, {"deep/1@1", "x/1@1"}, {"deep/2@1"}, {"deep/3@1"}} {
				e.clk.Advance(time.Millisecond)
				cs, err := e.b.Claim(e.ctx, 5)
				mustNoError(t, err, "Claim")
				got := claimNames(cs)
				slices.Sort(got)
				mustEqual(t, want, got, "claims")
				errs, err := e.b.SucceedMany(e.ctx, cs)
				mustNoError(t, err, "SucceedMany")
				mustEqual(t, make([]error, len(want)), errs, "SucceedMany's errors")
			}
			mustEqual(t, worklease.DomainInfo{Processed: 2}, e.inspect("x"))
		}},
		{"ClaimSkipsBusyAndPaused", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("busy", 1, worklease.Acquired).Token
			e.enqueue("busy", 2, nil, worklease.Enqueued)
			e.enqueue("paused", 1, nil, worklease.Enqueued)
			e.pause("paused")
			e.claim(5)
			e.clk.Advance(time.Millisecond)
			mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.resume("paused"))
			e.clk.Advance(time.Millisecond)
			e.succeed("busy", tok)
			e.claim(5, "paused/1@1", "busy/2@1")
		}},
		{"MixesWithTryAcquire", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.enqueue("A", 1, nil, worklease.Enqueued)
			e.enqueue("A", 2, nil, worklease.Enqueued)
			tok := e.acquire("A", 1, worklease.Acquired).Token // the head, granted at once
			e.claim(5)
			res := e.succeedNext("A", tok)
			mustEqual(t, worklease.NextAcquired, res.Status)
			e.claim(5)
			e.succeed("A", res.Lease.Token)
			e.enqueue("A", 3, nil, worklease.Enqueued)
			e.succeed("A", e.claim(5, "A/3@1")[0].Token)
			mustEqual(t, worklease.DomainInfo{Processed: 3}, e.inspect("A"))
		}},
		{"RetryWaitsOutItsDelay", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(2))
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.enqueue("a", 2, nil, worklease.Enqueued)
			e.clk.Advance(time.Millisecond)
			e.enqueue("b", 1, nil, worklease.Enqueued)
			first := e.clk.Now()
			tok := e.claim(1, "a/1@1")[0].Token
			mustEqual(t, worklease.RetryResult{RetryCount: 1}, e.retry("a", tok, errors.New("flaky"), time.Minute))
			_, err := e.b.Succeed(e.ctx, "a", tok)
			mustSentinel(t, worklease.ErrNoLease, err, "Succeed with the retried token")
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{1, 2}}, e.inspect("a"))
			e.refused(worklease.ErrBacklogOrder, func() error { _, err := e.b.TryAcquire(e.ctx, "a", 2); return err })
			b := e.claim(5, "b/1@1") // a waits, and a/2 does not overtake a/1
			e.clk.Advance(time.Minute - time.Millisecond)
			e.claim(5)
			e.clk.Advance(time.Millisecond)
			tok = e.claim(5, "a/1@2")[0].Token
			mustEqual(t, []worklease.LeaseInfo{{Domain: "a", Offset: 1, Token: tok, AcquiredAt: first, RetryCount: 1}}, e.leasesOf("a"),
				"a's lease after its retry")
			// No delay: the domain is ready at once.
			mustEqual(t, worklease.RetryResult{RetryCount: 2}, e.retry("a", tok, nil, 0))
			e.succeed("b", b[0].Token)
			e.claim(5, "a/1@3")
		}},
		{"RetryWithTTL", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			e.enqueue("a", 1, nil, worklease.Enqueued)
			tok := e.claim(1, "a/1@1")[0].Token
			e.retry("a", tok, nil, time.Second)
			mustEqual(t, 0, len(e.leases()), "leases after Retry")
			e.clk.Advance(time.Second)
			c := e.claim(1, "a/1@2")[0]
			mustTrue(t, c.ExpiresAt.Equal(e.clk.Now().Add(time.Minute)), "ExpiresAt %v: want a full TTL from now", c.ExpiresAt)
		}},
		{"RetryUntilDeadLetter", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(1))
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.enqueue("a", 2, nil, worklease.Enqueued)
			tok := e.claim(1, "a/1@1")[0].Token
			mustEqual(t, worklease.RetryResult{RetryCount: 1}, e.retry("a", tok, errors.New("first"), 0))
			tok = e.claim(1, "a/1@2")[0].Token
			mustEqual(t, worklease.RetryResult{DeadLettered: true, RetryCount: 2}, e.retry("a", tok, errors.New("last"), time.Hour))
			mustEqual(t, []worklease.DeadLetter{{Domain: "a", Offset: 1, Cause: errors.New("last"), Attempts: 2, At: epoch}}, e.deadLetters("a"))
			e.enqueue("a", 1, nil, worklease.AlreadyFailed)
			tok = e.claim(1, "a/2@1")[0].Token // no delay after a dead letter
			e.redrive("a", 1)
			e.succeed("a", tok)
			e.claim(1, "a/1@1")

			parked := s.start(t, worklease.WithMaxRetries(0), worklease.WithParkOnDeadLetter())
			parked.enqueue("a", 1, nil, worklease.Enqueued)
			parked.enqueue("a", 2, nil, worklease.Enqueued)
			tok = parked.claim(1, "a/1@1")[0].Token
			mustEqual(t, worklease.RetryResult{DeadLettered: true, RetryCount: 1}, parked.retry("a", tok, nil, 0))
			mustEqual(t, worklease.DomainInfo{Paused: true, Backlog: []int64{2}, Failed: 1}, parked.inspect("a"))
			parked.claim(1)
			parked.resume("a")
			parked.claim(1, "a/2@1")
		}},
		{"RetryEndedByPauseAndResume", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.retry("a", e.claim(1, "a/1@1")[0].Token, nil, time.Hour)
			e.enqueue("a", 2, nil, worklease.Enqueued) // the domain keeps its delay
			e.claim(1)
			e.pause("a")
			e.resume("a")
			e.claim(1, "a/1@2")
		}},
		{"RetryDelayEndsWithItsOffset", func(t *testing.T, s *Suite) {
			// A retry's delay is its offset's: a domain whose delayed head is
			// killed, or given a redriven offset before it, waits no more.
			// Killing another offset keeps the delay.
			e := s.start(t)
			for off := int64(1); off <= 4; off++ {
				e.enqueue("a", off, nil, worklease.Enqueued)
			}
			e.kill("a", 4, "")
			e.retry("a", e.claim(1, "a/1@1")[0].Token, nil, time.Hour)
			e.kill("a", 2, "")
			e.claim(1)
			e.redrive("a", 4)
			e.succeed("a", e.claim(1, "a/4@1")[0].Token)
			e.retry("a", e.claim(1, "a/1@2")[0].Token, nil, time.Hour)
			e.kill("a", 1, "")
			e.claim(1, "a/3@1")
		}},
		{"RetryRefused", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			e.enqueue("A", 1, nil, worklease.Enqueued)
			e.enqueue("A", 2, nil, worklease.Enqueued)
			tok := e.claim(1, "A/1@1")[0].Token
			retry := func(d string, tok worklease.Token, delay time.Duration) func() error {
				return func() error { _, err := e.b.Retry(e.ctx, d, tok, nil, delay); return err }
			}
			e.refused(worklease.ErrInvalidDuration, retry("A", tok, -time.Second), "nobody")
			e.refused(worklease.ErrTokenMismatch, retry("A", worklease.Token{}, 0), "nobody")
			e.refused(worklease.ErrTokenMismatch, retry("A", token(t, tok.Fence()+1, tok.Serial(), tok.Instance()), 0), "nobody")
			e.refused(worklease.ErrNoLease, retry("nobody", tok, 0), "nobody")
			e.refused(worklease.ErrInvalidDomain, retry("", tok, -time.Second), "nobody") // the domain is checked first
			e.retry("A", tok, nil, 0)
			e.refused(worklease.ErrNoLease, retry("A", tok, 0))
			tok = e.claim(1, "A/1@2")[0].Token
			e.refused(worklease.ErrTokenMismatch, retry("A", token(t, tok.Fence()-1, tok.Serial(), tok.Instance()), 0))
			e.clk.Advance(time.Minute)
			_, err := e.b.Retry(e.ctx, "A", tok, nil, 0)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "Retry of an expired lease")
		}},
		{"ClaimTakesOverDueLeases", func(t *testing.T, s *Suite) {
			const ttl = 10 * time.Second
			e := s.start(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(1))
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.enqueue("a", 2, nil, worklease.Enqueued)
			e.enqueue("b", 1, nil, worklease.Enqueued)
			ta := e.claim(1, "a/1@1")[0].Token
			e.clk.Advance(time.Second)
			tb := e.claim(1, "b/1@1")[0].Token
			e.clk.Advance(ttl) // both are due, a first
			e.claim(1, "a/1@2")
			mustEqual(t, 1, len(e.leasesOf("b")), "b's lease is taken over by a later claim")
			_, err := e.b.Succeed(e.ctx, "a", ta)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "Succeed with the expired token")
			e.claim(5, "b/1@2")
			_, err = e.b.Extend(e.ctx, "b", tb, time.Second)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "Extend with the expired token")
			e.clk.Advance(ttl) // a's second attempt expires too: its last
			e.claim(5, "a/2@1")
			mustEqual(t, []worklease.DeadLetter{{Domain: "a", Offset: 1, Cause: worklease.ErrLeaseExpired, Attempts: 2, At: e.clk.Now()}}, e.deadLetters("a"))
		}},
		{"ClaimRefused", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.enqueue("A", 1, nil, worklease.Enqueued)
			for _, n := range []int{0, -1} {
				e.refused(worklease.ErrInvalidClaim, func() error { _, err := e.b.Claim(e.ctx, n); return err })
				e.refused(worklease.ErrInvalidClaim, func() error { _, err := e.b.WaitClaim(e.ctx, n, time.Millisecond); return err })
				// The error reads as one sentence: the package's name, the
				// rule, and the call.
				_, err := e.b.Claim(e.ctx, n)
				mustOneSentence(t, err, fmt.Sprintf("(Claim of %d)", n))
				_, err = e.b.WaitClaim(e.ctx, n, time.Millisecond)
				mustOneSentence(t, err, fmt.Sprintf("(WaitClaim of %d)", n))
			}
		}},
		{"SucceedMany", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.enqueue("a", 2, nil, worklease.Enqueued)
			e.enqueue("b", 1, nil, worklease.Enqueued)
			e.enqueue("c", 1, nil, worklease.Enqueued)
			cs := e.claimAny(3)
			mustEqual(t, 3, len(cs), "claims")
			byDomain := claimsByDomain(cs)
			stale := byDomain["b"]
			stale.Token = worklease.Token{}
			errs, err := e.b.SucceedMany(e.ctx, []worklease.Claim{
				byDomain["a"], stale, byDomain["c"], byDomain["a"], {Domain: "nobody", Token: byDomain["a"].Token}, {Domain: ""},
			})
			mustNoError(t, err, "SucceedMany")
			mustErrors(t, "SucceedMany", []error{nil, worklease.ErrTokenMismatch, nil, worklease.ErrNoLease, worklease.ErrNoLease,
				worklease.ErrInvalidDomain}, errs)
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{2}, Processed: 1}, e.inspect("a"))
			mustEqual(t, worklease.DomainInfo{Processed: 1}, e.inspect("c"))
			mustEqual(t, []string{"b"}, leasedDomains(e.leases()), "leases before the next claim")
			e.claim(5, "a/2@1")
			errs, err = e.b.SucceedMany(e.ctx, nil)
			mustNoError(t, err, "SucceedMany of none")
			mustEqual(t, 0, len(errs), "SucceedMany of none")
		}},
		{"ClaimNext", func(t *testing.T, s *Suite) {
			// ClaimNext ends a batch of leases and leases each domain's
			// next offset to the caller, MaxStreak times in a row at most;
			// then the domain goes behind those that waited.
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			for off := range int64(worklease.MaxStreak + 2) {
				e.enqueue("deep", off, nil, worklease.Enqueued)
			}
			e.clk.Advance(time.Millisecond)
			e.enqueue("one", 1, nil, worklease.Enqueued)
			e.clk.Advance(time.Millisecond)
			e.enqueue("paused", 1, nil, worklease.Enqueued)
			e.enqueue("paused", 2, nil, worklease.Enqueued)
			e.clk.Advance(time.Millisecond)
			e.enqueue("later", 1, nil, worklease.Enqueued)
			e.clk.Advance(time.Millisecond)
			cs := e.claim(3, "deep/0@1", "one/1@1", "paused/1@1")
			e.pause("paused")
			next := e.claimNext(cs, "deep/1@1")
			mustTrue(t, next[0].Token.Fence() > cs[0].Token.Fence(), "fence %d after %d", next[0].Token.Fence(), cs[0].Token.Fence())
			mustTrue(t, next[0].ExpiresAt.Equal(e.clk.Now().Add(time.Minute)), "ExpiresAt %v: want a TTL from now", next[0].ExpiresAt)
			mustEqual(t, worklease.DomainInfo{Processed: 1}, e.inspect("one"))
			mustEqual(t, worklease.DomainInfo{Paused: true, Backlog: []int64{2}, Processed: 1}, e.inspect("paused"))
			// ClaimNext repeated, as after a lost answer, answers with the
			// lease it granted, and changes nothing.
			before := e.inspect("deep")
			again, errs, err := e.b.ClaimNext(e.ctx, cs[:1])
			mustNoError(t, err, "ClaimNext repeated")
			mustNoError(t, errs[0], "ClaimNext repeated")
			mustEqual(t, next, again, "ClaimNext repeated")
			mustEqual(t, before, e.inspect("deep"), "deep after ClaimNext repeated")
			// The ended lease's token is spent for the other calls.
			errs, err = e.b.SucceedMany(e.ctx, cs[:1])
			mustNoError(t, err, "SucceedMany of a spent token")
			mustSentinel(t, worklease.ErrTokenMismatch, errs[0], "SucceedMany of a spent token")
			// deep goes on to MaxStreak leases in a row, then waits behind
			// later.
			for off := 2; off <= worklease.MaxStreak; off++ {
				next = e.claimNext(next, fmt.Sprintf("deep/%d@1", off))
			}
			e.clk.Advance(time.Millisecond)
			e.claimNext(next)
			e.clk.Advance(time.Millisecond)
			cs = e.claim(5, "later/1@1", fmt.Sprintf("deep/%d@1", worklease.MaxStreak+1))
			// Claim starts a new streak.
			e.claimNext(cs[1:])
			mustEqual(t, worklease.DomainInfo{Processed: worklease.MaxStreak + 2}, e.inspect("deep"))
		}},
		{"ClaimNextRepeatedBesideItsNext", func(t *testing.T, s *Suite) {
			// A ClaimNext repeated beside the lease it granted the first
			// time, which a later claim of the batch ends: the answer
			// leaves that lease out, as it is ended.
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			for off := range int64(3) {
				e.enqueue("d", off, nil, worklease.Enqueued)
			}
			first := e.claim(1, "d/0@1")
			next := e.claimNext(first, "d/1@1")
			e.claimNext(append(first, next...)) // grants nothing: next's end is a Succeed
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{2}, Processed: 2}, e.inspect("d"))
			e.claim(1, "d/2@1")
		}},
		{"RetryMany", func(t *testing.T, s *Suite) {
			// RetryMany ends each failed attempt as Retry would, in order:
			// a domain named twice finds its token spent the second time.
			e := s.start(t, worklease.WithMaxRetries(1))
			for _, d := range []string{"a", "b", "c"} {
				e.enqueue(d, 1, nil, worklease.Enqueued)
				e.enqueue(d, 2, nil, worklease.Enqueued)
			}
			cs := claimsByDomain(e.claimAny(3))
			fail := func(d string, delay time.Duration) worklease.Failure {
				return worklease.Failure{Claim: cs[d], Cause: errors.New("failed " + d), Delay: delay}
			}
			res, errs, err := e.b.RetryMany(e.ctx, []worklease.Failure{
				fail("a", 0), fail("b", time.Hour), fail("a", 0), fail("c", -time.Second), {Claim: worklease.Claim{Domain: "nobody", Token: cs["a"].Token}},
			})
			mustNoError(t, err, "RetryMany")
			mustErrors(t, "RetryMany", []error{nil, nil, worklease.ErrNoLease, worklease.ErrInvalidDuration, worklease.ErrNoLease}, errs)
			mustEqual(t, []worklease.RetryResult{{RetryCount: 1}, {RetryCount: 1}, {}, {}, {}}, res, "RetryMany's results")
			again := e.claim(5, "a/1@2") // b waits out its delay; c is still leased
			// Out of retries: a dead letter, with its cause.
			res, errs, err = e.b.RetryMany(e.ctx, []worklease.Failure{{Claim: again[0], Cause: errors.New("failed again")}})
			mustNoError(t, err, "RetryMany")
			mustErrors(t, "RetryMany", []error{nil}, errs)
			mustEqual(t, []worklease.RetryResult{{DeadLettered: true, RetryCount: 2}}, res, "RetryMany out of retries")
			dls, err := e.b.DeadLetters(e.ctx, "a")
			mustNoError(t, err, "DeadLetters")
			mustEqual(t, 1, len(dls), "a's dead letters")
			mustTrue(t, dls[0].Cause != nil && dls[0].Cause.Error() == "failed again", "the dead letter's cause: %v", dls[0].Cause)
			e.claim(5, "a/2@1")
			res, errs, err = e.b.RetryMany(e.ctx, nil)
			mustNoError(t, err, "RetryMany of none")
			mustEqual(t, 0, len(res)+len(errs), "RetryMany of none")
		}},
		{"ClaimNextAfterRetry", func(t *testing.T, s *Suite) {
			// The next offset carries the attempts of a retry, and a retry
			// waiting out its delay is leased by a claim only.
			e := s.start(t, worklease.WithMaxRetries(3))
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.enqueue("a", 2, nil, worklease.Enqueued)
			tok := e.claim(1, "a/1@1")[0].Token
			e.retry("a", tok, nil, 0)
			e.claimNext(e.claim(1, "a/1@2"), "a/2@1")
			e.enqueue("b", 1, nil, worklease.Enqueued)
			tok = e.claim(1, "b/1@1")[0].Token
			e.enqueue("b", 2, nil, worklease.Enqueued)
			e.enqueue("b", 3, nil, worklease.Enqueued)
			e.retry("b", tok, nil, time.Hour)
			e.claim(5)
			// TryAcquire of the offset ends the delay; the next is leased
			// at once.
			res := e.acquire("b", 1, worklease.Acquired)
			e.claimNext([]worklease.Claim{{Domain: "b", Offset: 1, Token: res.Token}}, "b/2@1")
		}},
		{"ClaimNextRefused", func(t *testing.T, s *Suite) {
			// A claim ClaimNext cannot end gets Succeed's error and no next
			// lease; neither does a domain's second claim in the batch,
			// answered after the first.
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			for _, d := range []string{"a", "b", "c"} {
				e.enqueue(d, 1, nil, worklease.Enqueued)
				e.enqueue(d, 2, nil, worklease.Enqueued)
			}
			cs := e.claimAny(3)
			mustEqual(t, 3, len(cs), "claims")
			byDomain := claimsByDomain(cs)
			stale := byDomain["b"]
			stale.Token = worklease.Token{}
			next, errs, err := e.b.ClaimNext(e.ctx, []worklease.Claim{
				byDomain["a"], stale, byDomain["b"], byDomain["a"], {Domain: "nobody", Token: byDomain["a"].Token}, {Domain: ""},
			})
			mustNoError(t, err, "ClaimNext")
			mustErrors(t, "ClaimNext", []error{nil, worklease.ErrTokenMismatch, nil, worklease.ErrTokenMismatch, worklease.ErrNoLease,
				worklease.ErrInvalidDomain}, errs)
			mustEqual(t, []string{"a/2@1"}, claimNames(next), "ClaimNext's leases")
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{2}, Processed: 1}, e.inspect("b"))
			e.clk.Advance(time.Minute) // c's lease is due
			next, errs, err = e.b.ClaimNext(e.ctx, []worklease.Claim{byDomain["c"]})
			mustNoError(t, err, "ClaimNext")
			mustSentinel(t, worklease.ErrLeaseExpired, errs[0], "ClaimNext of a due lease")
			mustEqual(t, 0, len(next), "ClaimNext of a due lease: leases")
			next, errs, err = e.b.ClaimNext(e.ctx, nil)
			mustNoError(t, err, "ClaimNext of none")
			mustEqual(t, 0, len(errs)+len(next), "ClaimNext of none")
		}},
		{"ClaimNextPayloads", func(t *testing.T, s *Suite) {
			e := s.startPayloads(t)
			e.enqueue("A", 1, []byte("one"), worklease.Enqueued)
			e.enqueue("A", 2, []byte("two"), worklease.Enqueued)
			e.enqueue("A", 3, nil, worklease.Enqueued)
			next := e.claimNext(e.claim(1, "A/1@1"), "A/2@1")
			mustEqual(t, []byte("two"), next[0].Payload, "A/2's payload")
			next = e.claimNext(next, "A/3@1")
			mustTrue(t, next[0].Payload == nil, "A/3 was stored without a payload: got %q", next[0].Payload)
		}},
		{"Payloads", func(t *testing.T, s *Suite) {
			s.need(t, FeatureDuplicates)
			e := s.startPayloads(t, worklease.WithMaxRetries(1))
			p := []byte{0, 1, 2, 255}
			e.enqueue("A", 1, p, worklease.Enqueued)
			p[0] = 9 // the caller's buffer is its own
			e.enqueue("A", 1, []byte{0, 1, 2, 255}, worklease.AlreadyQueued)
			e.refused(worklease.ErrPayloadMismatch, func() error { _, err := e.b.Enqueue(e.ctx, "A", 1, []byte("other")); return err })
			e.enqueue("A", 2, nil, worklease.Enqueued)
			e.enqueue("A", 3, []byte("three"), worklease.Enqueued)
			c := e.claim(1, "A/1@1")[0]
			mustEqual(t, []byte{0, 1, 2, 255}, c.Payload, "A/1's payload")
			c.Payload[1] = 9 // the claim's copy is the caller's too
			e.retry("A", c.Token, nil, 0)
			c = e.claim(1, "A/1@2")[0]
			mustEqual(t, []byte{0, 1, 2, 255}, c.Payload, "A/1's payload after a retry")
			mustEqual(t, worklease.RetryResult{DeadLettered: true, RetryCount: 2}, e.retry("A", c.Token, nil, 0))
			e.redrive("A", 1) // a dead letter keeps its payload
			c = e.claim(1, "A/1@1")[0]
			mustEqual(t, []byte{0, 1, 2, 255}, c.Payload, "A/1's payload after a redrive")
			e.succeed("A", c.Token)
			c = e.claim(1, "A/2@1")[0]
			mustTrue(t, c.Payload == nil, "A/2 was stored without a payload: got %q", c.Payload)
			e.kill("A", 3, "operator") // queued: its payload goes with it to the dead letters
			e.redrive("A", 3)
			e.succeed("A", c.Token)
			mustEqual(t, []byte("three"), e.claim(1, "A/3@1")[0].Payload, "A/3's payload after a kill and a redrive")
		}},
		{"WaitClaimReturnsReadyWork", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.enqueue("A", 1, nil, worklease.Enqueued)
			cs, err := e.b.WaitClaim(e.ctx, 5, time.Hour)
			mustNoError(t, err, "WaitClaim")
			mustEqual(t, []string{"A/1@1"}, claimNames(cs))
		}},
		{"WaitClaimWakesOnEnqueue", func(t *testing.T, s *Suite) {
			e := s.start(t)
			done := e.waitClaim(e.ctx, 1)
			e.mustWait(done)
			e.enqueue("A", 1, nil, worklease.Enqueued)
			r := e.waited(done)
			mustNoError(t, r.err, "WaitClaim")
			mustEqual(t, []string{"A/1@1"}, claimNames(r.claims))
		}},
		{"WaitClaimWakesOnSucceed", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.enqueue("A", 1, nil, worklease.Enqueued)
			e.enqueue("A", 2, nil, worklease.Enqueued)
			tok := e.claim(1, "A/1@1")[0].Token
			done := e.waitClaim(e.ctx, 1)
			e.mustWait(done)
			e.succeed("A", tok)
			r := e.waited(done)
			mustNoError(t, r.err, "WaitClaim")
			mustEqual(t, []string{"A/2@1"}, claimNames(r.claims))
		}},
		{"WaitClaimEndsWithContext", func(t *testing.T, s *Suite) {
			e := s.start(t)
			ctx, cancel := context.WithCancel(e.ctx)
			done := e.waitClaim(ctx, 1)
			e.mustWait(done)
			cancel()
			r := e.waited(done)
			mustErrorIs(t, r.err, context.Canceled, "WaitClaim after its context was canceled")
			mustEqual(t, 0, len(r.claims), "claims")
			ctx, cancel = context.WithTimeout(e.ctx, 50*time.Millisecond)
			defer cancel()
			r = e.waited(e.waitClaim(ctx, 1))
			mustErrorIs(t, r.err, context.DeadlineExceeded, "WaitClaim past its deadline")
			e.enqueue("A", 1, nil, worklease.Enqueued)
			e.claim(1, "A/1@1") // nothing was claimed meanwhile
		}},
		{"WaitClaimEndsWithClose", func(t *testing.T, s *Suite) {
			e := s.start(t)
			done := e.waitClaim(e.ctx, 1)
			e.mustWait(done)
			mustNoError(t, e.b.Close(), "Close")
			mustErrorIs(t, e.waited(done).err, worklease.ErrClosed, "WaitClaim after Close")
		}},
		{"Restart", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(2))
			e.enqueue("a", 1, nil, worklease.Enqueued)
			e.enqueue("a", 2, nil, worklease.Enqueued)
			e.enqueue("b", 1, nil, worklease.Enqueued)
			tok := e.claim(1, "a/1@1")[0].Token
			e.retry("a", tok, errors.New("flaky"), time.Hour)
			before := e.state()
			e.reopen()
			mustEqual(t, before, e.state(), "the state after a restart")
			// The delay survives the restart: the offset keeps its place
			// and its attempts, and is ready once the delay is over.
			e.claim(5, "b/1@1")
			e.clk.Advance(time.Hour - time.Millisecond)
			e.claim(5)
			e.clk.Advance(time.Millisecond)
			e.claim(5, "a/1@2")
		}},
		{"Events", func(t *testing.T, s *Suite) {
			s.need(t, FeatureDuplicates)
			e := s.startObserved(t, worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(3))
			e.enqueue("A", 1, nil, worklease.Enqueued)
			e.enqueue("A", 1, nil, worklease.AlreadyQueued) // a duplicate is no event
			tok := e.claim(1, "A/1@1")[0].Token
			e.retry("A", tok, errors.New("flaky"), 0)
			e.claim(1, "A/1@2")
			e.clk.Advance(time.Minute)
			e.succeed("A", e.claim(1, "A/1@3")[0].Token) // taken over, then claimed
			type ev struct {
				Kind    worklease.EventKind
				Offset  int64
				Attempt int
			}
			var got []ev
			for _, x := range e.rec.of("A") {
				got = append(got, ev{x.Kind, x.Offset, x.Attempt})
			}
			mustEqual(t, []ev{
				{worklease.EventEnqueued, 1, 0}, {worklease.EventAcquired, 1, 1}, {worklease.EventRetrying, 1, 1},
				{worklease.EventRequeued, 1, 1}, {worklease.EventAcquired, 1, 2}, {worklease.EventExpired, 1, 2},
				{worklease.EventRequeued, 1, 2}, {worklease.EventAcquired, 1, 3}, {worklease.EventProcessed, 1, 3},
			}, got)
			evs := e.rec.of("A")
			mustEqual(t, tok, evs[2].Token, "Retrying's token")
			mustEqual(t, "flaky", evs[2].Cause.Error(), "Retrying's cause")
			mustZero(t, evs[3].Token, "Requeued's token")
		}},
		{"ClaimNextEvents", func(t *testing.T, s *Suite) {
			e := s.startObserved(t)
			e.enqueue("A", 1, nil, worklease.Enqueued)
			e.enqueue("A", 2, nil, worklease.Enqueued)
			c := e.claim(1, "A/1@1")[0]
			next := e.claimNext([]worklease.Claim{c}, "A/2@1")
			e.claimNext(next)
			type ev struct {
				Kind   worklease.EventKind
				Offset int64
				Token  worklease.Token
			}
			var got []ev
			for _, x := range e.rec.of("A")[2:] {
				got = append(got, ev{x.Kind, x.Offset, x.Token})
			}
			mustEqual(t, []ev{
				{worklease.EventAcquired, 1, c.Token}, {worklease.EventProcessed, 1, c.Token},
				{worklease.EventAcquired, 2, next[0].Token}, {worklease.EventProcessed, 2, next[0].Token},
			}, got)
		}},
		{"Workers", testPullWorkers},
	})
}

// testPullWorkers runs producers that enqueue the offsets of shared domains
// while workers claim them, some one at a time and some in batches, and
// retry an offset's first attempt now and then: every offset is processed
// once, in the order enqueued.
func testPullWorkers(t *testing.T, s *Suite) {
	const (
		domains = 6
		offsets = 30
		workers = 4
	)
	e := s.start(t, worklease.WithMaxRetries(1))
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	stop := time.AfterFunc(time.Minute, cancel) // offsets lost: the checks below say which
	defer stop.Stop()
	var (
		mu    sync.Mutex // guards order and left
		order = map[string][]int64{}
		left  = domains * offsets // the workers stop when every offset was processed
	)
	errs := make(chan error, domains+workers)
	var producers, consumers sync.WaitGroup
	for i := range domains {
		d := fmt.Sprintf("d%d", i)
		producers.Go(func() {
			for off := range int64(offsets) {
				if _, err := e.b.Enqueue(e.ctx, d, off, nil); err != nil {
					errs <- fmt.Errorf("Enqueue(%q, %d): %w", d, off, err)
					return
				}
			}
		})
	}
	for w := range workers {
		consumers.Go(func() {
			for {
				cs, err := e.b.WaitClaim(ctx, 1+w%3, 10*time.Millisecond)
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("WaitClaim: %w", err)
					}
					cancel() // the others stop too
					return
				}
				var done []worklease.Claim
				for _, c := range cs {
					if c.Attempt == 1 && c.Offset%4 == int64(w%4) {
						if _, err := e.b.Retry(e.ctx, c.Domain, c.Token, errors.New("flaky"), 0); err != nil {
							errs <- fmt.Errorf("Retry(%q, %d): %w", c.Domain, c.Offset, err)
							return
						}
						continue
					}
					mu.Lock()
					order[c.Domain] = append(order[c.Domain], c.Offset)
					if left--; left == 0 {
						cancel()
					}
					mu.Unlock()
					done = append(done, c)
				}
				if w%2 == 0 {
					out, err := e.b.SucceedMany(e.ctx, done)
					err = cmp.Or(err, errors.Join(out...))
					if err != nil {
						errs <- fmt.Errorf("SucceedMany: %w", err)
						return
					}
					continue
				}
				for _, c := range done {
					if _, err := e.b.Succeed(e.ctx, c.Domain, c.Token); err != nil {
						errs <- fmt.Errorf("Succeed(%q, %d): %w", c.Domain, c.Offset, err)
						return
					}
				}
			}
		})
	}
	producers.Wait()
	consumers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	want := make([]int64, offsets)
	for off := range want {
		want[off] = int64(off)
	}
	for i := range domains {
		d := fmt.Sprintf("d%d", i)
		mustEqual(t, want, order[d], "%q: offsets processed", d)
		mustEqual(t, worklease.DomainInfo{Processed: offsets}, e.inspect(d), "%q", d)
	}
	mustEqual(t, 0, len(e.leases()), "leases left")
	e.check()
}

// startPayloads is start for a case that stores payloads. It skips t
// unless the backend keeps them.
func (s *Suite) startPayloads(t *testing.T, opts ...worklease.Option) *env {
	t.Helper()
	if !s.Payloads {
		t.Skip("the backend keeps no payloads (Suite.Payloads is false)")
	}
	return s.start(t, opts...)
}

func (e *env) enqueue(d string, off int64, payload []byte, want worklease.AcquireStatus) {
	e.t.Helper()
	st, err := e.b.Enqueue(e.ctx, d, off, payload)
	mustNoError(e.t, err, "Enqueue(%q, %d)", d, off)
	mustEqual(e.t, want, st, "Enqueue(%q, %d)", d, off)
}

// claim claims up to n leases, and checks them against want, each
// "domain/offset@attempt" in the order claimed: no claims if want is
// empty.
func (e *env) claim(n int, want ...string) []worklease.Claim {
	e.t.Helper()
	cs := e.claimAny(n)
	mustEqual(e.t, want, claimNames(cs), "Claim(%d)", n)
	return cs
}

// claimAny claims up to n leases, and checks that each is its domain's
// lease now.
func (e *env) claimAny(n int) []worklease.Claim {
	e.t.Helper()
	cs, err := e.b.Claim(e.ctx, n)
	mustNoError(e.t, err, "Claim(%d)", n)
	for _, c := range cs {
		mustFalse(e.t, c.Token.IsZero(), "Claim(%d): %s/%d: zero token", n, c.Domain, c.Offset)
		info := e.inspect(c.Domain)
		mustTrue(e.t, info.Leased && info.Lease.Offset == c.Offset && info.Lease.Token == c.Token,
			"Claim(%d): %s/%d: the domain's lease is %+v", n, c.Domain, c.Offset, info.Lease)
	}
	return cs
}

// claimNext ends claims with ClaimNext, each of which must succeed, and
// checks the leases granted next against want, as claim does.
func (e *env) claimNext(claims []worklease.Claim, want ...string) []worklease.Claim {
	e.t.Helper()
	next, errs, err := e.b.ClaimNext(e.ctx, claims)
	mustNoError(e.t, err, "ClaimNext(%v)", claimNames(claims))
	mustEqual(e.t, len(claims), len(errs), "ClaimNext(%v): errors", claimNames(claims))
	for i, err := range errs {
		mustNoError(e.t, err, "ClaimNext(%v): claim %d", claimNames(claims), i)
	}
	mustEqual(e.t, want, claimNames(next), "ClaimNext(%v)", claimNames(claims))
	for _, c := range next {
		info := e.inspect(c.Domain)
		mustTrue(e.t, info.Leased && info.Lease.Offset == c.Offset && info.Lease.Token == c.Token,
			"ClaimNext: %s/%d: the domain's lease is %+v", c.Domain, c.Offset, info.Lease)
	}
	return next
}

func (e *env) retry(d string, tok worklease.Token, cause error, delay time.Duration) worklease.RetryResult {
	e.t.Helper()
	res, err := e.b.Retry(e.ctx, d, tok, cause, delay)
	mustNoError(e.t, err, "Retry(%q, %v, %v)", d, tok, delay)
	return res
}

// leasesOf returns what Leases reports of d.
func (e *env) leasesOf(d string) []worklease.LeaseInfo {
	e.t.Helper()
	var out []worklease.LeaseInfo
	for _, l := range e.leases() {
		if l.Domain == d {
			out = append(out, l)
		}
	}
	return out
}

// claimNames returns "domain/offset@attempt" for each claim; nil for none.
func claimNames(cs []worklease.Claim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%d@%d", c.Domain, c.Offset, c.Attempt))
	}
	return out
}

// leasedDomains returns the domains of ls, in order.
func leasedDomains(ls []worklease.LeaseInfo) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Domain)
	}
	return out
}

// A waitResult is what a WaitClaim returned.
type waitResult struct {
	claims []worklease.Claim
	err    error
}

// waitClaim runs WaitClaim for n leases, with a poll long enough that
// only a wake-up or ctx ends it, in a goroutine of its own, and returns
// where its result comes.
func (e *env) waitClaim(ctx context.Context, n int) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		cs, err := e.b.WaitClaim(ctx, n, time.Hour)
		done <- waitResult{cs, err}
	}()
	return done
}

// mustWait checks that a WaitClaim is still waiting a while after it began
// (it may not have begun to wait yet, which the case does not need).
func (e *env) mustWait(done <-chan waitResult) {
	e.t.Helper()
	select {
	case r := <-done:
		e.t.Fatalf("WaitClaim returned with nothing to claim: %v, %v", claimNames(r.claims), r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// waited returns the result of a WaitClaim, which must come soon: its
// poll is an hour.
func (e *env) waited(done <-chan waitResult) waitResult {
	e.t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		e.t.Fatal("WaitClaim was not woken")
		return waitResult{}
	}
}

// mustOneSentence checks that err, an error of a claim count, reads as one
// sentence that ends with call: one package name, one rule.
func mustOneSentence(t tb, err error, call string) {
	t.Helper()
	text := err.Error()
	mustTrue(t, strings.Count(text, ": ") == 1 && strings.Count(text, "claim count") == 1 && strings.HasSuffix(text, " "+call),
		"the error %q, one sentence that ends with %q", text, call)
}

// claimsByDomain returns cs by their domains.
func claimsByDomain(cs []worklease.Claim) map[string]worklease.Claim {
	out := make(map[string]worklease.Claim, len(cs))
	for _, c := range cs {
		out[c.Domain] = c
	}
	return out
}
