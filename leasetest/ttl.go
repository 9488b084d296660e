package leasetest

import (
	"errors"
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
