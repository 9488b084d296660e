package worklease_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

// Tests of the lease lifecycle: time-limited leases (WithLeaseTTL), Extend,
// lazy expiry, Reap, and the failure strategies of seed 003.

// inspect returns Inspect(domain), which must not fail.
func inspect(t *testing.T, m *worklease.Manager, domain string) worklease.DomainInfo {
	t.Helper()
	info, err := m.Inspect(domain)
	require.NoError(t, err)
	return info
}

// deadLetters returns DeadLetters(domain), which must not fail.
func deadLetters(t *testing.T, m *worklease.Manager, domain string) []worklease.DeadLetter {
	t.Helper()
	dls, err := m.DeadLetters(domain)
	require.NoError(t, err)
	return dls
}

// staleCalls are the three calls a holder makes with its token, each
// returning only its error.
var staleCalls = []struct {
	name string
	call func(m *worklease.Manager, domain string, tok worklease.Token) error
}{
	{"Succeed", func(m *worklease.Manager, d string, tok worklease.Token) error {
		_, err := m.Succeed(d, tok)
		return err
	}},
	{"Fail", func(m *worklease.Manager, d string, tok worklease.Token) error {
		_, err := m.Fail(d, tok, errors.New("late"))
		return err
	}},
	{"Extend", func(m *worklease.Manager, d string, tok worklease.Token) error {
		_, err := m.Extend(d, tok, time.Minute)
		return err
	}},
}

// Seed 003, "Lock visibility timeout": given a worker holds a lock token,
// when it does not acknowledge completion within the visibility timeout, then
// the lock expires and the message becomes available for other workers to
// re-acquire (under a new token with a higher fence), and the first worker's
// token is refused with ErrLeaseExpired.
func TestLockVisibilityTimeout(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	for _, stale := range staleCalls {
		t.Run("stale "+stale.name, func(t *testing.T) {
			t.Parallel()
			m, clk := newManager(t, worklease.WithLeaseTTL(ttl))
			w1 := acquire(t, m, "queue", 1, worklease.Acquired)
			require.Equal(t, epoch.Add(ttl), w1.ExpiresAt)

			clk.Advance(ttl - time.Nanosecond)
			held := acquire(t, m, "queue", 1, worklease.AlreadyAcquired)
			require.Equal(t, w1.Token, held.Token, "still hidden just before the timeout")

			clk.Advance(time.Nanosecond) // the lease runs out exactly at ExpiresAt
			w2 := acquire(t, m, "queue", 1, worklease.Acquired)
			require.NotEqual(t, w1.Token, w2.Token, "re-acquired under a new token")
			require.Greater(t, w2.Token.Fence(), w1.Token.Fence())
			require.Equal(t, 1, w2.RetryCount, "the expiry counts as a failed attempt")
			require.Equal(t, epoch, w2.AcquiredAt, "AcquiredAt marks the first grant")
			require.Equal(t, epoch.Add(2*ttl), w2.ExpiresAt, "the new grant gets a full TTL")

			require.ErrorIs(t, stale.call(m, "queue", w1.Token), worklease.ErrLeaseExpired)
			info := inspect(t, m, "queue")
			require.True(t, info.Leased)
			require.Equal(t, w2.Token, info.Lease.Token, "the stale call changed nothing")
			require.Equal(t, epoch.Add(2*ttl), info.Lease.ExpiresAt)

			_, err := m.Succeed("queue", w2.Token)
			require.NoError(t, err)
			require.ErrorIs(t, stale.call(m, "queue", w1.Token), worklease.ErrLeaseExpired,
				"the expired token is still told why after the offset is done")
		})
	}
}

// Seed 003, "Release lock on success": acknowledging removes the lock
// metadata and makes the message terminal.
func TestReleaseLockOnSuccess(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithLeaseTTL(time.Minute))
	res := acquire(t, m, "queue", 1, worklease.Acquired)
	sres, err := m.Succeed("queue", res.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NoBacklog}, sres)

	require.Equal(t, worklease.DomainInfo{Processed: 1}, inspect(t, m, "queue"), "lock metadata removed")
	leases, err := m.Leases()
	require.NoError(t, err)
	require.Empty(t, leases)
	acquire(t, m, "queue", 1, worklease.AlreadyProcessed)

	clk.Advance(time.Hour)
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Empty(t, exp, "a released lease never expires")
	acquire(t, m, "queue", 1, worklease.AlreadyProcessed)
}

// Seed 003, "Release lock on failure": the lock metadata is cleared or
// replaced according to the failure strategy: kept with a fresh visibility
// timeout while retries remain, cleared when the message is dead-lettered.
func TestReleaseLockOnFailure(t *testing.T) {
	t.Parallel()
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
			m, clk := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(tt.maxRetries))
			res := acquire(t, m, "queue", 1, worklease.Acquired)
			clk.Advance(10 * time.Second)
			fres, err := m.Fail("queue", res.Token, errors.New("boom"))
			require.NoError(t, err)
			require.Equal(t, tt.want, fres)

			info := inspect(t, m, "queue")
			require.Equal(t, tt.leased, info.Leased)
			if tt.leased {
				require.Equal(t, worklease.LeaseInfo{
					Domain: "queue", Offset: 1, Token: res.Token,
					AcquiredAt: epoch, ExpiresAt: epoch.Add(10*time.Second + ttl), RetryCount: 1,
				}, info.Lease, "lock replaced: same token, new expiry")
				require.Empty(t, deadLetters(t, m, "queue"))
			} else {
				require.Equal(t, worklease.LeaseInfo{}, info.Lease)
				require.Len(t, deadLetters(t, m, "queue"), 1)
				acquire(t, m, "queue", 1, worklease.AlreadyFailed)
			}
		})
	}
}

// Seed 003, "Retry to original queue": with mode retry and maxRetries 5, a
// message that fails while retryCount < maxRetries has its retry counter
// incremented and gets a new visibility timeout. Here the lease is kept
// under the same token (seed 000), and ExpiresAt moves to a full TTL from
// each Fail.
func TestRetryToOriginalQueue(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	m, clk := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(5))
	res := acquire(t, m, "tasks", 1, worklease.Acquired)
	for n := 1; n <= 5; n++ {
		now := clk.Advance(20 * time.Second) // within the TTL every time
		fres, err := m.Fail("tasks", res.Token, fmt.Errorf("attempt %d", n))
		require.NoError(t, err)
		require.Equal(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: n}, fres)

		again := acquire(t, m, "tasks", 1, worklease.AlreadyAcquired)
		require.Equal(t, res.Token, again.Token, "lease kept")
		require.Equal(t, n, again.RetryCount, "retry counter incremented")
		require.Equal(t, now.Add(ttl), again.ExpiresAt, "new visibility timeout")
		require.Equal(t, epoch, again.AcquiredAt)
	}
	clk.Advance(20 * time.Second)
	fres, err := m.Fail("tasks", res.Token, errors.New("sixth"))
	require.NoError(t, err)
	require.Equal(t, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 5}, fres,
		"retryCount reached maxRetries")
}

// Seed 003, "Route to dead-letter queue": with mode dead-letter
// (WithMaxRetries(0)) the first failure moves the message to the dead
// letters, annotated with reason, retries and timestamp.
func TestRouteToDeadLetterQueue(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithMaxRetries(0))
	res := acquire(t, m, "tasks", 7, worklease.Acquired)
	acquire(t, m, "tasks", 8, worklease.Enqueued)
	now := clk.Advance(3 * time.Second)
	reason := errors.New("malformed payload")

	fres, err := m.Fail("tasks", res.Token, reason)
	require.NoError(t, err)
	require.Equal(t, worklease.FailResult{Status: worklease.GiveUpNextHint, Next: 8}, fres)
	require.Equal(t, []worklease.DeadLetter{
		{Domain: "tasks", Offset: 7, Cause: reason, Attempts: 1, At: now},
	}, deadLetters(t, m, "tasks"))
	acquire(t, m, "tasks", 7, worklease.AlreadyFailed)
	acquire(t, m, "tasks", 8, worklease.Acquired)
}

// Seed 003, "Retry then dead-letter": with mode hybrid and maxRetries 3, a
// message that fails when the retry counter has reached maxRetries moves to
// the dead letters instead of being retried again.
func TestRetryThenDeadLetter(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithMaxRetries(3))
	res := acquire(t, m, "tasks", 1, worklease.Acquired)
	acquire(t, m, "tasks", 2, worklease.Enqueued)
	for n := 1; n <= 3; n++ {
		clk.Advance(time.Second)
		fres, err := m.Fail("tasks", res.Token, errors.New("transient"))
		require.NoError(t, err)
		require.Equal(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: n}, fres)
	}
	now := clk.Advance(time.Second)
	last := errors.New("still failing")
	fres, err := m.Fail("tasks", res.Token, last)
	require.NoError(t, err)
	require.Equal(t, worklease.FailResult{Status: worklease.GiveUpNextHint, RetryCount: 3, Next: 2}, fres)
	require.Equal(t, []worklease.DeadLetter{
		{Domain: "tasks", Offset: 1, Cause: last, Attempts: 4, At: now},
	}, deadLetters(t, m, "tasks"), "the last failure's reason, and every attempt counted")
	require.False(t, inspect(t, m, "tasks").Leased, "not requeued")
}

// Seed 003, "Renew lock before timeout": a worker holding a lock with a
// 30-second visibility timeout renews it at 20 seconds; the expiration moves
// atomically and the message stays hidden from other workers until then.
func TestRenewLockBeforeTimeout(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithLeaseTTL(30*time.Second))
	res := acquire(t, m, "queue", 1, worklease.Acquired)
	require.Equal(t, epoch.Add(30*time.Second), res.ExpiresAt)

	clk.Set(epoch.Add(20 * time.Second))
	at, err := m.Extend("queue", res.Token, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, epoch.Add(50*time.Second), at)

	clk.Set(epoch.Add(45 * time.Second)) // past the original timeout
	other := acquire(t, m, "queue", 1, worklease.AlreadyAcquired)
	require.Equal(t, res.Token, other.Token)
	require.Equal(t, epoch.Add(50*time.Second), other.ExpiresAt)
	acquire(t, m, "queue", 2, worklease.Enqueued)
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Empty(t, exp, "not due before the new expiration")

	clk.Set(epoch.Add(50 * time.Second))
	exp, err = m.Reap()
	require.NoError(t, err)
	require.Equal(t, []worklease.Expiry{{
		Domain: "queue", Offset: 1, Token: res.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true},
	}}, exp, "due at the new expiration")
	require.Equal(t, []int64{1, 2}, inspect(t, m, "queue").Backlog, "back at the front, ahead of 2")
}

// Seed 003, "Prevent renewal after release": renewing a lock that was
// released by acknowledging success is rejected because it no longer exists.
func TestPreventRenewalAfterRelease(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, worklease.WithLeaseTTL(30*time.Second))
	res := acquire(t, m, "queue", 1, worklease.Acquired)
	acquire(t, m, "queue", 2, worklease.Enqueued)
	_, err := m.Succeed("queue", res.Token)
	require.NoError(t, err)

	_, err = m.Extend("queue", res.Token, 30*time.Second)
	require.ErrorIs(t, err, worklease.ErrNoLease)

	next := acquire(t, m, "queue", 2, worklease.Acquired)
	_, err = m.Extend("queue", res.Token, 30*time.Second)
	require.ErrorIs(t, err, worklease.ErrTokenMismatch, "nor can it renew the next holder's lease")
	require.Equal(t, next.ExpiresAt, inspect(t, m, "queue").Lease.ExpiresAt)
}

// An offset whose lease keeps expiring (a poison message that kills its
// workers) is dead-lettered after maxRetries+1 expiries, with cause
// ErrLeaseExpired, and its domain moves on to the next offset.
func TestExpiryIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	for _, viaReap := range []bool{true, false} {
		name := map[bool]string{true: "reaped", false: "lazily on touch"}[viaReap]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, clk := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(2))
			res := acquire(t, m, "A", 1, worklease.Acquired)
			acquire(t, m, "A", 2, worklease.Enqueued)
			fences := []uint64{res.Token.Fence()}
			for n := 1; n <= 2; n++ {
				clk.Advance(ttl)
				if viaReap {
					exp, err := m.Reap()
					require.NoError(t, err)
					require.Equal(t, []worklease.Expiry{{
						Domain: "A", Offset: 1, Token: res.Token, Attempts: n, Head: worklease.Head{Next: 1, HasNext: true},
					}}, exp)
				}
				res = acquire(t, m, "A", 1, worklease.Acquired)
				require.Equal(t, n, res.RetryCount, "RetryCount carried across re-grants")
				require.Equal(t, epoch, res.AcquiredAt, "AcquiredAt kept across re-grants")
				require.Greater(t, res.Token.Fence(), fences[len(fences)-1])
				fences = append(fences, res.Token.Fence())
			}

			now := clk.Advance(ttl) // the third expiry: out of retries
			if viaReap {
				exp, err := m.Reap()
				require.NoError(t, err)
				require.Equal(t, []worklease.Expiry{{
					Domain: "A", Offset: 1, Token: res.Token, Attempts: 3, DeadLettered: true, Head: worklease.Head{Next: 2, HasNext: true},
				}}, exp, "the hint moves on to the next offset")
			}
			acquire(t, m, "A", 1, worklease.AlreadyFailed)
			dls := deadLetters(t, m, "A")
			require.Len(t, dls, 1)
			require.ErrorIs(t, dls[0].Cause, worklease.ErrLeaseExpired)
			require.Equal(t, worklease.DeadLetter{Domain: "A", Offset: 1, Cause: dls[0].Cause, Attempts: 3, At: now}, dls[0])

			_, err := m.Succeed("A", res.Token)
			require.ErrorIs(t, err, worklease.ErrLeaseExpired)
			next := acquire(t, m, "A", 2, worklease.Acquired)
			require.Equal(t, 0, next.RetryCount)
			require.Greater(t, next.Token.Fence(), fences[len(fences)-1])
		})
	}
}

// A retry scheduled by Fail and the expiries share one attempt budget.
func TestFailAndExpiryShareRetries(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	m, clk := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(2))
	res := acquire(t, m, "A", 1, worklease.Acquired)
	clk.Advance(ttl) // expiry: attempt 1 failed
	res = acquire(t, m, "A", 1, worklease.Acquired)
	fres, err := m.Fail("A", res.Token, nil) // attempt 2 failed
	require.NoError(t, err)
	require.Equal(t, worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: 2}, fres)
	fres, err = m.Fail("A", res.Token, nil) // attempt 3 failed: out of retries
	require.NoError(t, err)
	require.Equal(t, worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: 2}, fres)
}

func TestExtend(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	tests := []struct {
		name string
		// run calls Extend (after the clock is at epoch+10s) and returns
		// what it returned; tok is the lease on "A", offset 1; other is a
		// token of domain "B".
		run     func(m *worklease.Manager, tok, other worklease.Token) (time.Time, error)
		wantErr error
		want    time.Time // the return value, and the lease's expiry after
	}{
		{"lengthens", func(m *worklease.Manager, tok, _ worklease.Token) (time.Time, error) {
			return m.Extend("A", tok, time.Minute)
		}, nil, epoch.Add(10*time.Second + time.Minute)},
		{"never shortens", func(m *worklease.Manager, tok, _ worklease.Token) (time.Time, error) {
			return m.Extend("A", tok, time.Second)
		}, nil, epoch.Add(ttl)},
		{"to the same expiry", func(m *worklease.Manager, tok, _ worklease.Token) (time.Time, error) {
			return m.Extend("A", tok, ttl-10*time.Second)
		}, nil, epoch.Add(ttl)},
		{"zero duration", func(m *worklease.Manager, tok, _ worklease.Token) (time.Time, error) {
			return m.Extend("A", tok, 0)
		}, worklease.ErrInvalidDuration, epoch.Add(ttl)},
		{"negative duration", func(m *worklease.Manager, tok, _ worklease.Token) (time.Time, error) {
			return m.Extend("A", tok, -time.Minute)
		}, worklease.ErrInvalidDuration, epoch.Add(ttl)},
		{"wrong token", func(m *worklease.Manager, _, other worklease.Token) (time.Time, error) {
			return m.Extend("A", other, time.Minute)
		}, worklease.ErrTokenMismatch, epoch.Add(ttl)},
		{"zero token", func(m *worklease.Manager, _, _ worklease.Token) (time.Time, error) {
			return m.Extend("A", worklease.Token{}, time.Minute)
		}, worklease.ErrTokenMismatch, epoch.Add(ttl)},
		{"unknown domain", func(m *worklease.Manager, tok, _ worklease.Token) (time.Time, error) {
			return m.Extend("nobody", tok, time.Minute)
		}, worklease.ErrNoLease, epoch.Add(ttl)},
		{"repeatedly", func(m *worklease.Manager, tok, _ worklease.Token) (time.Time, error) {
			for range 3 {
				if _, err := m.Extend("A", tok, time.Hour); err != nil {
					return time.Time{}, err
				}
			}
			return m.Extend("A", tok, 2*time.Hour)
		}, nil, epoch.Add(10*time.Second + 2*time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, clk := newManager(t, worklease.WithLeaseTTL(ttl))
			res := acquire(t, m, "A", 1, worklease.Acquired)
			other := acquire(t, m, "B", 1, worklease.Acquired)
			clk.Advance(10 * time.Second)

			at, err := tt.run(m, res.Token, other.Token)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Zero(t, at)
			} else {
				require.NoError(t, err)
				require.Equal(t, tt.want, at)
			}
			info := inspect(t, m, "A")
			require.Equal(t, tt.want, info.Lease.ExpiresAt)
			require.Equal(t, res.Token, info.Lease.Token)
		})
	}
}

// Without WithLeaseTTL leases never expire: Extend checks the token and
// returns the zero time.
func TestExtendWithoutTTL(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t)
	res := acquire(t, m, "A", 1, worklease.Acquired)
	require.Zero(t, res.ExpiresAt)

	at, err := m.Extend("A", res.Token, time.Minute)
	require.NoError(t, err)
	require.Zero(t, at)
	_, err = m.Extend("A", worklease.Token{}, time.Minute)
	require.ErrorIs(t, err, worklease.ErrTokenMismatch)
	_, err = m.Extend("A", res.Token, 0)
	require.ErrorIs(t, err, worklease.ErrInvalidDuration)

	clk.Advance(1000 * time.Hour)
	info := inspect(t, m, "A")
	require.True(t, info.Leased)
	require.Zero(t, info.Lease.ExpiresAt)
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Empty(t, exp, "Reap with no TTL returns nothing")
	_, err = m.Succeed("A", res.Token)
	require.NoError(t, err)
}

// Without WithLeaseTTL nothing ever expires, so Reap returns nothing.
func TestReapWithoutTTL(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t)
	acquire(t, m, "A", 1, worklease.Acquired)
	acquire(t, m, "B", 1, worklease.Acquired)
	clk.Advance(24 * 365 * time.Hour)
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Empty(t, exp)
	leases, err := m.Leases()
	require.NoError(t, err)
	require.Len(t, leases, 2)
}

// Extend exactly at the expiry is too late: the lease ran out.
func TestExtendAtExpiryIsTooLate(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithLeaseTTL(time.Second))
	res := acquire(t, m, "A", 1, worklease.Acquired)
	clk.Advance(time.Second)
	_, err := m.Extend("A", res.Token, time.Minute)
	require.ErrorIs(t, err, worklease.ErrLeaseExpired)
	info := inspect(t, m, "A")
	require.False(t, info.Leased)
	require.Equal(t, []int64{1}, info.Backlog)
}

// A lease extended far into the future is not reaped. Its expiry lies beyond
// what a Unix-nanosecond count can represent, so it is clamped to the last
// moment one can, in 2262.
func TestExtendByHugeDuration(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithLeaseTTL(time.Minute))
	res := acquire(t, m, "A", 1, worklease.Acquired)
	early := acquire(t, m, "B", 1, worklease.Acquired)
	at, err := m.Extend("A", res.Token, time.Duration(math.MaxInt64))
	require.NoError(t, err)
	require.Equal(t, time.Unix(0, math.MaxInt64).In(epoch.Location()), at)

	clk.Advance(time.Hour)
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Equal(t, []worklease.Expiry{{Domain: "B", Offset: 1, Token: early.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}}}, exp)
	require.True(t, inspect(t, m, "A").Leased)
	exp, err = m.Reap()
	require.NoError(t, err)
	require.Empty(t, exp)
}

// Reap returns exactly the expired leases, sorted by domain, and leaves
// unexpired and extended ones alone. A lease already revoked by a touch is
// not reported again.
func TestReap(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	m, clk := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(1))

	// "poison" expires once before the round under test, so this expiry is
	// its last attempt.
	poison := acquire(t, m, "poison", 5, worklease.Acquired)
	acquire(t, m, "poison", 6, worklease.Enqueued)
	clk.Advance(ttl)
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Equal(t, []worklease.Expiry{{Domain: "poison", Offset: 5, Token: poison.Token, Attempts: 1, Head: worklease.Head{Next: 5, HasNext: true}}}, exp)
	start := clk.Now()
	poison = acquire(t, m, "poison", 5, worklease.Acquired)

	c := acquire(t, m, "c", 1, worklease.Acquired) // expires at start+30s
	acquire(t, m, "c", 2, worklease.Enqueued)
	a := acquire(t, m, "a", 3, worklease.Acquired)
	extended := acquire(t, m, "extended", 1, worklease.Acquired)
	touched := acquire(t, m, "touched", 1, worklease.Acquired)
	clk.Advance(10 * time.Second)
	late := acquire(t, m, "late", 1, worklease.Acquired) // expires at start+40s
	_, err = m.Extend("extended", extended.Token, time.Minute)
	require.NoError(t, err)
	done := acquire(t, m, "done", 1, worklease.Acquired)
	_, err = m.Succeed("done", done.Token)
	require.NoError(t, err)

	clk.Set(start.Add(ttl))
	require.Equal(t, []int64{1}, inspect(t, m, "touched").Backlog, "revoked lazily by the touch")
	_, err = m.Succeed("touched", touched.Token)
	require.ErrorIs(t, err, worklease.ErrLeaseExpired)

	exp, err = m.Reap()
	require.NoError(t, err)
	require.Equal(t, []worklease.Expiry{
		{Domain: "a", Offset: 3, Token: a.Token, Attempts: 1, Head: worklease.Head{Next: 3, HasNext: true}},
		{Domain: "c", Offset: 1, Token: c.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}},
		{Domain: "poison", Offset: 5, Token: poison.Token, Attempts: 2, DeadLettered: true, Head: worklease.Head{Next: 6, HasNext: true}},
	}, exp)
	for _, d := range []string{"a", "c", "poison", "touched"} {
		require.False(t, inspect(t, m, d).Leased, d)
	}
	for _, d := range []string{"late", "extended"} {
		require.True(t, inspect(t, m, d).Leased, d)
	}

	exp, err = m.Reap()
	require.NoError(t, err)
	require.Empty(t, exp, "each expiry is reported once")

	clk.Set(start.Add(40 * time.Second))
	exp, err = m.Reap()
	require.NoError(t, err)
	require.Equal(t, []worklease.Expiry{{Domain: "late", Offset: 1, Token: late.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}}}, exp)
}

// Reap on a Manager with 10,000 leases whose grants are staggered so that
// only 10 are due returns exactly those 10.
func TestReapAtScale(t *testing.T) {
	t.Parallel()
	const (
		total = 10_000
		due   = 10
		ttl   = time.Minute
	)
	m, clk := newManager(t, worklease.WithLeaseTTL(ttl))
	var want []worklease.Expiry
	for i := range total {
		if i == due {
			clk.Advance(time.Second) // the rest are granted a second later
		}
		d := fmt.Sprintf("d%05d", i)
		res := acquire(t, m, d, int64(i), worklease.Acquired)
		if i < due {
			want = append(want, worklease.Expiry{Domain: d, Offset: int64(i), Token: res.Token, Attempts: 1, Head: worklease.Head{Next: int64(i), HasNext: true}})
		}
	}
	clk.Set(epoch.Add(ttl))
	exp, err := m.Reap()
	require.NoError(t, err)
	require.Equal(t, want, exp)

	leases, err := m.Leases()
	require.NoError(t, err)
	require.Len(t, leases, total-due)
	require.Equal(t, fmt.Sprintf("d%05d", due), leases[0].Domain)

	clk.Set(epoch.Add(ttl + time.Second))
	exp, err = m.Reap()
	require.NoError(t, err)
	require.Len(t, exp, total-due)
}

// Workers acquiring, extending, failing and finishing while a reaper
// advances the clock and reaps: every offset is processed exactly once and
// in order, and the invariants hold afterwards.
func TestReapConcurrentWithWorkers(t *testing.T) {
	t.Parallel()
	const (
		domains = 8
		workers = 8
		offsets = 40
	)
	m, clk := newManager(t, worklease.WithLeaseTTL(3*time.Second), worklease.WithMaxRetries(math.MaxInt32))
	var cursors [domains]atomic.Int64
	var processed [domains]atomic.Int64
	var remaining atomic.Int64 // domains not yet finished
	remaining.Store(domains)
	var failed atomic.Bool
	running := func() bool { return remaining.Load() > 0 && !failed.Load() }

	// advance moves domain d's cursor past off, once, whichever worker
	// learns first that off is done.
	advance := func(d int, off int64) {
		if cursors[d].CompareAndSwap(off, off+1) && off+1 == offsets {
			remaining.Add(-1)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // the reaper
		for running() {
			clk.Advance(time.Second)
			if _, err := m.Reap(); err != nil {
				failed.Store(true)
				return
			}
			runtime.Gosched()
		}
	})
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; running(); i++ {
				d := i % domains
				off := cursors[d].Load()
				if off >= offsets {
					runtime.Gosched()
					continue
				}
				name := fmt.Sprint("d", d)
				res, err := m.TryAcquire(name, off)
				if err != nil {
					errs <- err
					failed.Store(true)
					return
				}
				switch res.Status {
				case worklease.Acquired:
				case worklease.AlreadyProcessed: // finished by another worker
					advance(d, off)
					continue
				default:
					runtime.Gosched()
					continue
				}
				if i%3 == 0 {
					_, _ = m.Extend(name, res.Token, 2*time.Second)
				}
				if i%5 == 0 {
					_, _ = m.Fail(name, res.Token, nil) // retries are unlimited
				}
				_, err = m.Succeed(name, res.Token)
				switch {
				case err == nil:
					processed[d].Add(1)
					advance(d, off)
				// The lease ran out: its token is refused with
				// ErrLeaseExpired, or, once a later lease of the domain
				// has expired too, as any other stale token.
				case errors.Is(err, worklease.ErrLeaseExpired),
					errors.Is(err, worklease.ErrTokenMismatch),
					errors.Is(err, worklease.ErrNoLease):
				default:
					errs <- err
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.False(t, failed.Load())
	for d := range domains {
		require.Equal(t, int64(offsets), processed[d].Load(), "domain %d", d)
		p, f := worklease.Terminal(m, fmt.Sprint("d", d))
		require.Len(t, p, offsets)
		require.Empty(t, f)
	}
}

// Regression: taking a lease out of a shard's expiry index (on Succeed, or
// when Reap pops it) must not leave the record believing it is still in the
// index; its next lease must then be indexed afresh, without disturbing the
// other leases in the shard. One shard puts every domain in one index.
func TestExpiryIndexAfterRemoval(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	tests := []struct {
		name   string
		remove func(t *testing.T, m *worklease.Manager, clk *clock.Fake, a worklease.AcquireResult)
	}{
		{"released by Succeed", func(t *testing.T, m *worklease.Manager, _ *clock.Fake, a worklease.AcquireResult) {
			_, err := m.Succeed("a", a.Token)
			require.NoError(t, err)
		}},
		{"popped by Reap", func(t *testing.T, m *worklease.Manager, clk *clock.Fake, a worklease.AcquireResult) {
			clk.Set(epoch.Add(ttl)) // only "a" is due
			exp, err := m.Reap()
			require.NoError(t, err)
			require.Len(t, exp, 1)
			require.Equal(t, "a", exp[0].Domain)
			// Offset 1 is back at the front; give it up so that "a" is idle.
			_, err = m.Kill("a", 1, "gone")
			require.NoError(t, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, clk := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithShards(1))
			a := acquire(t, m, "a", 1, worklease.Acquired) // soonest: the index's root
			clk.Advance(10 * time.Second)
			b := acquire(t, m, "b", 1, worklease.Acquired)
			clk.Advance(10 * time.Second)
			c := acquire(t, m, "c", 1, worklease.Acquired)

			tt.remove(t, m, clk, a)
			require.NoError(t, worklease.CheckInvariants(m), "after the removal")

			clk.Set(epoch.Add(ttl))
			acquire(t, m, "a", 2, worklease.Acquired) // expires last
			require.NoError(t, worklease.CheckInvariants(m), "after the next grant")

			clk.Set(epoch.Add(10*time.Second + ttl))
			exp, err := m.Reap()
			require.NoError(t, err)
			require.Equal(t, []worklease.Expiry{{Domain: "b", Offset: 1, Token: b.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}}}, exp)
			clk.Set(epoch.Add(20*time.Second + ttl))
			exp, err = m.Reap()
			require.NoError(t, err)
			require.Equal(t, []worklease.Expiry{{Domain: "c", Offset: 1, Token: c.Token, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}}}, exp)
		})
	}
}

// Succeed, Fail and Extend check, in this order: Extend's duration; a
// domain the Manager does not know (ErrNoLease); the lease's expiry, which
// revokes it if due; the current lease's token (success); the domain's
// latest revoked token (ErrLeaseExpired or ErrLeaseRevoked, whether the
// domain is idle or leased again); no lease (ErrNoLease); any other token
// (ErrTokenMismatch). Only the latest revoked token is told why: an older
// one is just stale.
func TestTokenCheckOrder(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	others := []error{worklease.ErrLeaseExpired, worklease.ErrLeaseRevoked, worklease.ErrNoLease, worklease.ErrTokenMismatch, worklease.ErrInvalidDuration}
	tests := []struct {
		name string
		// setup leaves domain "A" in the state to test and returns the
		// token to pass.
		setup func(t *testing.T, m *worklease.Manager, clk *clock.Fake) worklease.Token
		want  error
	}{
		{"unknown domain", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) worklease.Token {
			return acquire(t, m, "B", 1, worklease.Acquired).Token
		}, worklease.ErrNoLease},
		{"expired, idle", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			clk.Advance(ttl)
			require.False(t, inspect(t, m, "A").Leased)
			return tok
		}, worklease.ErrLeaseExpired},
		{"expired, leased again", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			clk.Advance(ttl)
			acquire(t, m, "A", 1, worklease.Acquired)
			return tok
		}, worklease.ErrLeaseExpired},
		{"force-released, idle", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			_, err := m.ForceRelease("A")
			require.NoError(t, err)
			return tok
		}, worklease.ErrLeaseRevoked},
		{"killed, leased again", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			acquire(t, m, "A", 2, worklease.Enqueued)
			_, err := m.Kill("A", 1, "stuck")
			require.NoError(t, err)
			acquire(t, m, "A", 2, worklease.Acquired)
			return tok
		}, worklease.ErrLeaseRevoked},
		{"older revoked, idle", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			clk.Advance(ttl)
			acquire(t, m, "A", 1, worklease.Acquired)
			_, err := m.ForceRelease("A")
			require.NoError(t, err)
			return tok
		}, worklease.ErrNoLease},
		{"older revoked, leased again", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			clk.Advance(ttl)
			acquire(t, m, "A", 1, worklease.Acquired)
			_, err := m.ForceRelease("A")
			require.NoError(t, err)
			acquire(t, m, "A", 1, worklease.Acquired)
			return tok
		}, worklease.ErrTokenMismatch},
		{"zero token, idle after a revoke", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) worklease.Token {
			acquire(t, m, "A", 1, worklease.Acquired)
			_, err := m.ForceRelease("A")
			require.NoError(t, err)
			return worklease.Token{}
		}, worklease.ErrNoLease},
		{"finished, idle", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			_, err := m.Succeed("A", tok)
			require.NoError(t, err)
			return tok
		}, worklease.ErrNoLease},
		{"finished, leased again", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) worklease.Token {
			tok := acquire(t, m, "A", 1, worklease.Acquired).Token
			_, err := m.Succeed("A", tok)
			require.NoError(t, err)
			acquire(t, m, "A", 2, worklease.Acquired)
			return tok
		}, worklease.ErrTokenMismatch},
	}
	for _, tt := range tests {
		for _, call := range staleCalls {
			t.Run(tt.name+"/"+call.name, func(t *testing.T) {
				t.Parallel()
				m, clk := newManager(t, worklease.WithLeaseTTL(ttl))
				tok := tt.setup(t, m, clk)
				before := inspect(t, m, "A")
				err := call.call(m, "A", tok)
				require.ErrorIs(t, err, tt.want)
				for _, other := range others {
					if other != tt.want {
						require.NotErrorIs(t, err, other)
					}
				}
				require.Equal(t, before, inspect(t, m, "A"), "a refused call changes nothing")
				if call.name == "Extend" {
					_, err := m.Extend("A", tok, 0)
					require.ErrorIs(t, err, worklease.ErrInvalidDuration, "the duration is checked first")
				}
			})
		}
	}
}
