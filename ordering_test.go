package worklease_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// Tests of ordering modes (WithOrdering, WithBestEffortOrdering) and of
// exclusivity under concurrency: many consumers, and unique tokens.

// drain finishes the lease under tok and then every offset the hints name,
// and returns the offsets in the order they were granted.
func drain(t *testing.T, m *worklease.Manager, domain string, tok worklease.Token) []int64 {
	t.Helper()
	var got []int64
	for {
		sres, err := m.Succeed(domain, tok)
		require.NoError(t, err)
		if sres.Status == worklease.NoBacklog {
			return got
		}
		got = append(got, sres.Next)
		tok = acquire(t, m, domain, sres.Next, worklease.Acquired).Token
	}
}

// An ordering mode that is neither FIFO nor LIFO is a configuration error.
func TestRejectUnsupportedOrdering(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    worklease.Ordering
	}{
		{"unknown value", worklease.Ordering(7)},
		{"zero value", worklease.Ordering(0)},
		{"max value", worklease.Ordering(255)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := worklease.New(worklease.WithOrdering(tt.o))
			require.ErrorIs(t, err, worklease.ErrInvalidConfig)
			require.ErrorContains(t, err, "WithOrdering")
			require.ErrorContains(t, err, tt.o.String(), "the error names the invalid mode")
			require.Nil(t, m)
		})
	}
}

func TestOrderingStrings(t *testing.T) {
	t.Parallel()
	require.Equal(t, "FIFO", worklease.FIFO.String())
	require.Equal(t, "LIFO", worklease.LIFO.String())
	require.Equal(t, "Ordering(7)", worklease.Ordering(7).String())
}

func TestValidOrderingsAccepted(t *testing.T) {
	t.Parallel()
	for _, o := range []worklease.Ordering{worklease.FIFO, worklease.LIFO} {
		m, err := worklease.New(worklease.WithOrdering(o))
		require.NoError(t, err, o)
		require.NotNil(t, m)
	}
	m, err := worklease.New(worklease.WithLeaseTTL(-time.Second))
	require.ErrorIs(t, err, worklease.ErrInvalidConfig, "a negative TTL is invalid")
	require.Nil(t, m)
}

// With ordering relaxed (best effort), an idle domain may grant messages out
// of order, and says so: an EventOutOfOrder and Stats.OutOfOrder.
// Exclusivity is not relaxed.
func TestBestEffortOrdering(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	m, _ := newManager(t, worklease.WithBestEffortOrdering(), worklease.WithObserver(rec))
	first := acquire(t, m, "queue", 1, worklease.Acquired)
	for _, off := range []int64{2, 3, 4} {
		acquire(t, m, "queue", off, worklease.Enqueued)
	}
	acquire(t, m, "queue", 4, worklease.Enqueued) // still one in flight
	sres, err := m.Succeed("queue", first.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, sres)

	rec.reset()
	four := acquire(t, m, "queue", 4, worklease.Acquired) // out of turn
	require.Equal(t, []worklease.EventKind{worklease.EventOutOfOrder, worklease.EventAcquired}, rec.kinds())
	require.Equal(t, int64(4), rec.events()[0].Offset)
	require.Equal(t, []int64{2, 3}, inspect(t, m, "queue").Backlog, "taken out of the backlog")
	require.Equal(t, uint64(1), m.Stats().OutOfOrder)
	acquire(t, m, "queue", 3, worklease.Enqueued) // exclusivity holds

	sres, err = m.Succeed("queue", four.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, sres)

	rec.reset()
	nine := acquire(t, m, "queue", 9, worklease.Acquired) // never queued at all
	require.Equal(t, []worklease.EventKind{worklease.EventOutOfOrder, worklease.EventAcquired}, rec.kinds())
	require.Equal(t, []int64{2, 3}, drain(t, m, "queue", nine.Token), "the head in turn: no diagnostics")
	require.Equal(t, uint64(2), m.Stats().OutOfOrder)
}

// Under strict ordering the same out-of-turn acquire is a hard error that
// changes nothing and is not counted as out of order.
func TestStrictOrderingRejectsWhatBestEffortAllows(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	first := acquire(t, m, "queue", 1, worklease.Acquired)
	acquire(t, m, "queue", 2, worklease.Enqueued)
	acquire(t, m, "queue", 3, worklease.Enqueued)
	_, err := m.Succeed("queue", first.Token)
	require.NoError(t, err)
	_, err = m.TryAcquire("queue", 3)
	require.ErrorIs(t, err, worklease.ErrBacklogOrder)
	require.Equal(t, []int64{2, 3}, inspect(t, m, "queue").Backlog)
	require.Zero(t, m.Stats().OutOfOrder)
}

// Best-effort ordering under concurrency: many workers acquire whatever
// offsets they like; at most one is in flight at a time, and every offset is
// processed exactly once.
func TestBestEffortOrderingConcurrent(t *testing.T) {
	t.Parallel()
	const workers, offsets = 16, 64
	m, _ := newManager(t, worklease.WithBestEffortOrdering())
	var mu sync.Mutex
	inFlight, done := 0, map[int64]int{}
	var overlap atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range 4 * offsets {
				off := int64((w*7 + i*13) % offsets)
				res, err := m.TryAcquire("queue", off)
				if err != nil || res.Status != worklease.Acquired {
					continue
				}
				mu.Lock()
				inFlight++
				if inFlight > 1 {
					overlap.Store(true)
				}
				mu.Unlock()
				mu.Lock()
				inFlight--
				done[off]++
				mu.Unlock()
				if _, err := m.Succeed("queue", res.Token); err != nil {
					overlap.Store(true) // someone else finished our lease
				}
			}
		})
	}
	wg.Wait()
	require.False(t, overlap.Load(), "two leases in flight at once")
	for off, n := range done {
		require.Equal(t, 1, n, "offset %d processed %d times", off, n)
	}
	st := m.Stats()
	require.Equal(t, uint64(len(done)), st.Processed)
	require.Equal(t, st.Acquired, st.Processed)
}

// Exclusive acquisition: two workers poll the same queue concurrently and
// ask for the same pending message; exactly one obtains a lock token, and
// the other is told to skip it (AlreadyAcquired).
func TestAcquireMessageExclusively(t *testing.T) {
	t.Parallel()
	const rounds = 200
	m, _ := newManager(t)
	for round := range rounds {
		domain := fmt.Sprint("queue-", round%7)
		offset := int64(round)
		var results [2]worklease.AcquireResult
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				<-start
				results[w], errs[w] = m.TryAcquire(domain, offset)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		statuses := []worklease.AcquireStatus{results[0].Status, results[1].Status}
		require.ElementsMatch(t, []worklease.AcquireStatus{worklease.Acquired, worklease.AlreadyAcquired}, statuses, "round %d", round)
		winner := results[0]
		if winner.Status != worklease.Acquired {
			winner = results[1]
		}
		_, err := m.Succeed(domain, winner.Token)
		require.NoError(t, err)
	}
}

// 100 concurrent consumers: 100 workers poll the same queue when a single
// message becomes available; exactly one acquires it, and the rest see it
// unavailable until the lock is released. After the release, exactly one
// acquires the next message.
func TestHundredConcurrentConsumers(t *testing.T) {
	t.Parallel()
	const consumers = 100
	m, _ := newManager(t)

	// poll has every consumer ask for offset at once, and returns how many
	// got each status and the winner's result.
	poll := func(offset int64) (map[worklease.AcquireStatus]int, worklease.AcquireResult) {
		var mu sync.Mutex
		counts := map[worklease.AcquireStatus]int{}
		var winner worklease.AcquireResult
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range consumers {
			wg.Go(func() {
				<-start
				res, err := m.TryAcquire("queue", offset)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					counts[0]++ // not a status: fails the comparison below
					return
				}
				counts[res.Status]++
				if res.Status == worklease.Acquired {
					winner = res
				}
			})
		}
		close(start)
		wg.Wait()
		return counts, winner
	}

	counts, first := poll(1)
	require.Equal(t, map[worklease.AcquireStatus]int{worklease.Acquired: 1, worklease.AlreadyAcquired: consumers - 1}, counts)
	acquire(t, m, "queue", 2, worklease.Enqueued) // the next message arrives

	counts, _ = poll(1) // unavailable until released
	require.Equal(t, map[worklease.AcquireStatus]int{worklease.AlreadyAcquired: consumers}, counts)
	counts, _ = poll(2)
	require.Equal(t, map[worklease.AcquireStatus]int{worklease.Enqueued: consumers}, counts)
	require.Equal(t, []int64{2}, inspect(t, m, "queue").Backlog)

	sres, err := m.Succeed("queue", first.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, sres)

	counts, second := poll(2)
	require.Equal(t, map[worklease.AcquireStatus]int{worklease.Acquired: 1, worklease.AlreadyAcquired: consumers - 1}, counts)
	require.Greater(t, second.Token.Fence(), first.Token.Fence())
	counts, _ = poll(1)
	require.Equal(t, map[worklease.AcquireStatus]int{worklease.AlreadyProcessed: consumers}, counts)

	st := m.Stats()
	require.Equal(t, uint64(2), st.Acquired)
	require.Equal(t, uint64(1), st.Enqueued, "a hundred requests, queued once")
}

// Token uniqueness: every token issued is unique across grants, re-grants of
// the same offset, domains and managers, and is bound to one grant of one
// offset (its fence plays the eTag's part); duplicate or stale tokens are
// rejected.
func TestLockTokenUniqueness(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	m1, clk1 := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(10))
	m2, _ := newManager(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(10))

	seen := map[worklease.Token]string{}
	texts := map[string]bool{}
	issue := func(m *worklease.Manager, mname, domain string, offset int64) worklease.Token {
		t.Helper()
		tok := acquire(t, m, domain, offset, worklease.Acquired).Token
		where := fmt.Sprintf("%s/%s/%d", mname, domain, offset)
		require.NotContains(t, seen, tok, "token of %s already issued for %s", where, seen[tok])
		require.False(t, texts[tok.String()])
		seen[tok], texts[tok.String()] = where, true
		parsed, err := worklease.ParseToken(tok.String())
		require.NoError(t, err)
		require.Equal(t, tok, parsed)
		return tok
	}

	var stale []worklease.Token
	for _, mm := range []struct {
		m    *worklease.Manager
		name string
	}{{m1, "m1"}, {m2, "m2"}} {
		for _, d := range []string{"A", "B"} {
			tok := issue(mm.m, mm.name, d, 1)
			_, err := mm.m.Succeed(d, tok)
			require.NoError(t, err)
			stale = append(stale, tok)
			tok = issue(mm.m, mm.name, d, 2)
			_, err = mm.m.Fail(d, tok, nil) // a retry keeps the token
			require.NoError(t, err)
			_, err = mm.m.Succeed(d, tok)
			require.NoError(t, err)
			stale = append(stale, tok)
		}
	}
	// Re-grants of one offset: after an expiry and after a forced release.
	tok := issue(m1, "m1", "C", 1)
	clk1.Advance(ttl)
	expired := tok
	tok = issue(m1, "m1", "C", 1)
	_, err := m1.ForceRelease("C")
	require.NoError(t, err)
	released := tok
	current := issue(m1, "m1", "C", 1)
	require.Greater(t, current.Fence(), released.Fence())
	require.Greater(t, released.Fence(), expired.Fence())

	tests := []struct {
		name string
		tok  worklease.Token
		want []error // any of these
	}{
		// Only the latest revoked token is told why; an older one, whose
		// offset has been revoked again since, is just stale.
		{"expired grant of the same offset", expired, []error{worklease.ErrLeaseExpired, worklease.ErrTokenMismatch}},
		{"force-released grant of the same offset", released, []error{worklease.ErrLeaseRevoked}},
		{"another domain's token", tokenFor(t, seen, "m1/A/1"), []error{worklease.ErrTokenMismatch}},
		{"another manager's token", tokenFor(t, seen, "m2/A/1"), []error{worklease.ErrTokenMismatch}},
		{"forged next fence", worklease.RawToken(current.Fence()+1, 1, 1), []error{worklease.ErrTokenMismatch}},
		{"zero token", worklease.Token{}, []error{worklease.ErrTokenMismatch}},
	}
	for _, tt := range tests {
		for _, call := range staleCalls {
			err := call.call(m1, "C", tt.tok)
			require.Error(t, err, "%s: %s", tt.name, call.name)
			matched := false
			for _, want := range tt.want {
				matched = matched || errors.Is(err, want)
			}
			require.True(t, matched, "%s: %s: got %v, want one of %v", tt.name, call.name, err, tt.want)
		}
	}
	require.Equal(t, current, inspect(t, m1, "C").Lease.Token, "no stale call changed the lease")
	for _, tok := range stale[:4] { // m1's finished grants on A and B
		require.ErrorIs(t, staleCalls[0].call(m1, "A", tok), worklease.ErrNoLease)
	}
	_, err = m1.Succeed("C", current)
	require.NoError(t, err)
	_, err = m1.Succeed("C", current)
	require.ErrorIs(t, err, worklease.ErrNoLease, "a duplicate acknowledgement is rejected")
}

// tokenFor returns the token issued for where.
func tokenFor(t *testing.T, seen map[worklease.Token]string, where string) worklease.Token {
	t.Helper()
	for tok, w := range seen {
		if w == where {
			return tok
		}
	}
	t.Fatalf("no token issued for %s", where)
	return worklease.Token{}
}
