package worklease_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/memjournal"
)

// Tests of SucceedNext and FailNext: finishing an offset and leasing the
// backlog's head to the same caller in one step.

// TestSucceedNextOfferAtOnce offers an event the moment an observer hears
// that the previous offset finished, which is after the call released the
// domain's lock: the event is queued behind the lease SucceedNext or
// FailNext granted, never refused.
func TestSucceedNextOfferAtOnce(t *testing.T) {
	t.Parallel()
	var m *worklease.Manager
	offers := map[int64]error{}
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		if e.Kind == worklease.EventProcessed || e.Kind == worklease.EventDeadLettered {
			off := 100 + e.Offset
			res, err := m.TryAcquire(e.Domain, off)
			if err == nil && res.Status != worklease.Enqueued {
				err = fmt.Errorf("TryAcquire(%d) = %v, want Enqueued", off, res.Status)
			}
			offers[off] = err
		}
	})
	m, _ = newManager(t, worklease.WithObserver(obs), worklease.WithMaxRetries(0))
	tok := acquire(t, m, "A", 1, worklease.Acquired).Token
	acquire(t, m, "A", 2, worklease.Enqueued)
	s, err := m.SucceedNext("A", tok)
	require.NoError(t, err)
	require.Equal(t, worklease.NextAcquired, s.Status)
	require.Equal(t, map[int64]error{101: nil}, offers)
	f, err := m.FailNext("A", s.Lease.Token, nil)
	require.NoError(t, err)
	require.Equal(t, worklease.GiveUpNextAcquired, f.Status)
	require.Equal(t, int64(101), f.Lease.Offset)
	require.Equal(t, map[int64]error{101: nil, 102: nil}, offers)
}

// TestSucceedNextFailNextErrors checks that SucceedNext and FailNext return
// Succeed's and Fail's errors, naming themselves, and change nothing.
func TestSucceedNextFailNextErrors(t *testing.T) {
	t.Parallel()
	type call struct {
		name string
		do   func(m *worklease.Manager, domain string, tok worklease.Token) error
	}
	calls := []call{
		{"SucceedNext", func(m *worklease.Manager, d string, tok worklease.Token) error {
			res, err := m.SucceedNext(d, tok)
			if res != (worklease.SucceedResult{}) {
				return fmt.Errorf("a result with the error: %+v", res)
			}
			return err
		}},
		{"FailNext", func(m *worklease.Manager, d string, tok worklease.Token) error {
			res, err := m.FailNext(d, tok, errors.New("boom"))
			if res != (worklease.FailResult{}) {
				return fmt.Errorf("a result with the error: %+v", res)
			}
			return err
		}},
	}
	// Each case starts from "A" leased on offset 1 under cur, with offset 2
	// queued, and "idle", which processed offset 1. token returns the token
	// to pass; revoke, if set, runs first.
	tests := []struct {
		name   string
		domain string
		token  func(cur, stale worklease.Token) worklease.Token
		revoke func(m *worklease.Manager) error
		want   error
	}{
		{"unknown domain", "nobody", func(cur, _ worklease.Token) worklease.Token { return cur }, nil, worklease.ErrNoLease},
		{"idle domain", "idle", func(_, stale worklease.Token) worklease.Token { return stale }, nil, worklease.ErrNoLease},
		{"zero token", "A", func(_, _ worklease.Token) worklease.Token { return worklease.Token{} }, nil, worklease.ErrTokenMismatch},
		{"stale token", "A", func(_, stale worklease.Token) worklease.Token { return stale }, nil, worklease.ErrTokenMismatch},
		{"forged token", "A", func(cur, _ worklease.Token) worklease.Token {
			return worklease.RawToken(cur.Fence()+1, 1, 1)
		}, nil, worklease.ErrTokenMismatch},
		{"revoked", "A", func(cur, _ worklease.Token) worklease.Token { return cur }, func(m *worklease.Manager) error {
			_, err := m.ForceRelease("A")
			return err
		}, worklease.ErrLeaseRevoked},
	}
	for _, c := range calls {
		for _, tt := range tests {
			t.Run(c.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				m, _ := newManager(t, worklease.WithMaxRetries(0))
				cur := acquire(t, m, "A", 1, worklease.Acquired).Token
				acquire(t, m, "A", 2, worklease.Enqueued)
				stale := acquire(t, m, "idle", 1, worklease.Acquired).Token
				_, err := m.Succeed("idle", stale)
				require.NoError(t, err)
				if tt.revoke != nil {
					require.NoError(t, tt.revoke(m))
				}
				before := snapshot(t, m, "A", "idle", "nobody")
				stats := m.Stats()

				err = c.do(m, tt.domain, tt.token(cur, stale))
				require.ErrorIs(t, err, tt.want)
				require.ErrorContains(t, err, c.name)
				require.Equal(t, before, snapshot(t, m, "A", "idle", "nobody"))
				after := m.Stats()
				after.Rejected = stats.Rejected // a rejection is counted
				require.Equal(t, stats, after)
			})
		}
	}
}

// TestSucceedNextFailNextEvents checks the events and counts of the two
// transitions each call combines: the outcome, then the grant.
func TestSucceedNextFailNextEvents(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	m, clk := newManager(t, worklease.WithObserver(rec), worklease.WithMaxRetries(0))
	t1 := acquire(t, m, "A", 1, worklease.Acquired).Token
	acquire(t, m, "A", 2, worklease.Enqueued)
	acquire(t, m, "A", 3, worklease.Enqueued)
	at1 := clk.Advance(time.Second)
	s, err := m.SucceedNext("A", t1)
	require.NoError(t, err)
	at2 := clk.Advance(time.Second)
	f, err := m.FailNext("A", s.Lease.Token, errors.New("boom"))
	require.NoError(t, err)
	at3 := clk.Advance(time.Second)
	_, err = m.SucceedNext("A", f.Lease.Token)
	require.NoError(t, err)

	require.Equal(t, []ev{
		{worklease.EventAcquired, "A", 1, 1, t1, "", epoch},
		{worklease.EventEnqueued, "A", 2, 0, worklease.Token{}, "", epoch},
		{worklease.EventEnqueued, "A", 3, 0, worklease.Token{}, "", epoch},
		{worklease.EventProcessed, "A", 1, 1, t1, "", at1},
		{worklease.EventAcquired, "A", 2, 1, s.Lease.Token, "", at1},
		{worklease.EventDeadLettered, "A", 2, 1, s.Lease.Token, "boom", at2},
		{worklease.EventAcquired, "A", 3, 1, f.Lease.Token, "", at2},
		{worklease.EventProcessed, "A", 3, 1, f.Lease.Token, "", at3},
	}, evs(rec.events()))
	st := m.Stats()
	require.Equal(t, [4]uint64{3, 2, 2, 1}, [4]uint64{st.Acquired, st.Enqueued, st.Processed, st.DeadLettered})
}

// TestSucceedNextFailNextJournal checks that a journaled SucceedNext or
// FailNext writes the records of the two transitions it combines, and that
// a restart rebuilds the state they left: the granted lease included, which
// its holder can still finish.
func TestSucceedNextFailNextJournal(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	opts := []worklease.Option{worklease.WithMaxRetries(0), worklease.WithLeaseTTL(time.Hour)}
	m, clk := newManager(t, append(opts, worklease.WithJournal(j))...)
	t1 := acquire(t, m, "A", 1, worklease.Acquired).Token
	acquire(t, m, "A", 2, worklease.Enqueued)
	acquire(t, m, "A", 3, worklease.Enqueued)
	clk.Advance(time.Second)
	s, err := m.SucceedNext("A", t1)
	require.NoError(t, err)
	require.Equal(t, worklease.NextAcquired, s.Status)
	clk.Advance(time.Second)
	f, err := m.FailNext("A", s.Lease.Token, errors.New("boom"))
	require.NoError(t, err)
	require.Equal(t, worklease.GiveUpNextAcquired, f.Status)

	_, recs := j.Records()
	var kinds []worklease.EventKind
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
	}
	require.Equal(t, []worklease.EventKind{
		worklease.RecordSettings, // a new journal says how it reads first
		worklease.EventAcquired, worklease.EventEnqueued, worklease.EventEnqueued,
		worklease.EventProcessed, worklease.EventAcquired, // SucceedNext
		worklease.EventDeadLettered, worklease.EventAcquired, // FailNext
	}, kinds)
	last := recs[len(recs)-1]
	require.Equal(t, f.Lease.Token, last.Token)
	require.True(t, last.AcquiredAt.Equal(epoch.Add(2*time.Second)))
	require.True(t, last.ExpiresAt.Equal(f.Lease.ExpiresAt))

	domains := []string{"A"}
	before := dumpDomains(t, m, domains)
	require.NoError(t, m.Close())
	m, err = worklease.New(append(opts, worklease.WithClock(clk), worklease.WithJournal(j.Reopen()))...)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	require.Equal(t, before, dumpDomains(t, m, domains))
	require.NoError(t, worklease.CheckInvariants(m))

	// The lease FailNext granted survives, under its token.
	info := inspect(t, m, "A")
	require.Equal(t, f.Lease, info.Lease)
	res, err := m.SucceedNext("A", f.Lease.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NoBacklog}, res)
}

// TestConcurrentSucceedNext offers events to domains from several
// goroutines while one worker per domain drives it with SucceedNext and
// FailNext, never calling TryAcquire for a queued offset: no offer ever
// gets ErrBacklogOrder, and every domain finishes each offset once, in the
// order its offers were made.
func TestConcurrentSucceedNext(t *testing.T) {
	t.Parallel()
	const (
		domains   = 4
		producers = 3 // per domain
	)
	perProducer := 300
	if testing.Short() {
		perProducer = 50
	}
	m, err := worklease.New(worklease.WithMaxRetries(1))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()

	type grant struct {
		offset int64
		tok    worklease.Token
	}
	type domainRun struct {
		name string
		// mu orders the offers with their record in offered: the backlog
		// is in the order of the TryAcquire calls, and done must be too.
		mu      sync.Mutex
		offered []int64
		// granted receives the leases that offers were granted; the
		// worker works each, and then what SucceedNext and FailNext hand
		// it. It is closed once every offer was made.
		granted chan grant
		done    []int64 // offsets in the order they became terminal; the worker's
	}
	var orderErrs atomic.Int64
	var wg sync.WaitGroup
	runs := make([]*domainRun, domains)
	for d := range runs {
		r := &domainRun{name: fmt.Sprintf("d%d", d), granted: make(chan grant, producers*perProducer)}
		runs[d] = r
		var offers sync.WaitGroup
		for p := range producers {
			offers.Go(func() {
				for i := range perProducer {
					runtime.Gosched()             // spread the offers over the worker's run
					off := int64(i*producers + p) // distinct; the producers interleave
					r.mu.Lock()
					res, err := m.TryAcquire(r.name, off)
					if err == nil {
						r.offered = append(r.offered, off)
					}
					r.mu.Unlock()
					switch {
					case errors.Is(err, worklease.ErrBacklogOrder):
						orderErrs.Add(1)
					case err != nil:
						panic(fmt.Sprintf("TryAcquire(%s, %d): %v", r.name, off, err))
					case res.Status == worklease.Acquired:
						r.granted <- grant{off, res.Token}
					case res.Status != worklease.Enqueued:
						panic(fmt.Sprintf("TryAcquire(%s, %d) = %v", r.name, off, res.Status))
					}
				}
			})
		}
		wg.Go(func() {
			offers.Wait()
			close(r.granted)
		})
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(d), 1))
			for g := range r.granted {
				for !g.tok.IsZero() {
					var next worklease.LeaseInfo
					if rng.IntN(4) == 0 {
						res, err := m.FailNext(r.name, g.tok, errors.New("boom"))
						if err != nil {
							panic(err)
						}
						if res.Status == worklease.RetryScheduled {
							continue // again, under the same token
						}
						next = res.Lease
					} else {
						res, err := m.SucceedNext(r.name, g.tok)
						if err != nil {
							panic(err)
						}
						next = res.Lease
					}
					r.done = append(r.done, g.offset)
					g = grant{next.Offset, next.Token}
				}
			}
		})
	}
	wg.Wait()

	require.Zero(t, orderErrs.Load(), "offers refused with ErrBacklogOrder")
	for _, r := range runs {
		require.Len(t, r.offered, producers*perProducer, "%s: offers", r.name)
		require.Equal(t, r.offered, r.done, "%s: every offset once, in the order offered", r.name)
		info := inspect(t, m, r.name)
		require.False(t, info.Leased, r.name)
		require.Empty(t, info.Backlog, r.name)
	}
	require.NoError(t, worklease.CheckInvariants(m))
}
