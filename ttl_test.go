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
// lazy expiry, Reap, and the failure strategies (retry, dead-letter).

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

// Taking a lease out of a shard's expiry index (on Succeed, or when Reap
// pops it) must not leave the record believing it is still in the index; its
// next lease must then be indexed afresh, without disturbing the other
// leases in the shard. One shard puts every domain in one index.
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
