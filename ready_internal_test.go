package worklease

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readyRecord returns a record of domain that is ready: idle, running,
// with an offset queued.
func readyRecord(domain string) *domainRecord {
	r := &domainRecord{domain: domain}
	r.state.queue().pushBack(1)
	return r
}

// popAll pops every entry the queue gives at now and returns their
// domains, in order.
func popAll(q *readyQueue, now instant) []string {
	var out []string
	for {
		e, ok := q.pop(now)
		if !ok {
			return out
		}
		out = append(out, e.r.domain)
	}
}

// TestReadyQueueOrder checks the order pop takes entries in: the domains
// ready at once and those whose delay has ended, by when they became
// ready; a delay not over keeps its domain back, and a stale entry is
// skipped.
func TestReadyQueueOrder(t *testing.T) {
	t.Parallel()
	q := newReadyQueue()
	at := func(n int64) instant { return stateAt(n) }
	list := func(r *domainRecord, now, ready int64) {
		if ready > now { // a retry's delay, which the state keeps
			r.state.coldPart().retryAt = at(ready)
		}
		q.sync(r, at(now))
		require.True(t, r.listed, "%s is ready", r.domain)
	}
	a, b, c, d, e := readyRecord("a"), readyRecord("b"), readyRecord("c"), readyRecord("d"), readyRecord("e")
	list(a, 1, 1)
	list(b, 1, 5) // a retry's delay: ready at 5
	list(c, 2, 2)
	list(d, 3, 9)
	list(e, 6, 6)
	// c stops being ready and becomes so again: it goes to the back.
	c.state.backlog.popFront()
	q.sync(c, at(7))
	require.False(t, c.listed)
	c.state.backlog.pushBack(2)
	q.sync(c, at(7))
	require.NoError(t, q.check(5))

	require.Equal(t, []string{"a", "b", "e", "c"}, popAll(q, at(8)), "at 8")
	require.Equal(t, []string{"d"}, popAll(q, at(9)), "at 9")
	require.Empty(t, popAll(q, at(10)))
}

// TestReadyQueueCompacts checks that domains that keep becoming ready and
// stopping before any claim, as TryAcquire's grants make them, leave the
// queue no bigger than a bound in the number of domains ready.
func TestReadyQueueCompacts(t *testing.T) {
	t.Parallel()
	q := newReadyQueue()
	rs := make([]*domainRecord, 10)
	for i := range rs {
		rs[i] = readyRecord(fmt.Sprint(i))
	}
	for round := range 1000 {
		r := rs[round%len(rs)]
		now := stateAt(int64(round))
		if round%2 == 1 {
			r.state.coldPart().retryAt = now.add(time.Second)
		}
		q.sync(r, now)
		r.state.backlog.popFront()
		r.state.endRetryDelay()
		q.sync(r, now)
		r.state.backlog.pushBack(1)
	}
	q.mu.Lock()
	entries := len(q.now) - q.head + len(q.later)
	q.mu.Unlock()
	require.LessOrEqual(t, entries, 2*len(rs)+64)
	require.NoError(t, q.check(0))
}

// TestPullQueueFollowsEveryCall checks, after each call of a sequence
// that makes a domain ready and not, that the ready queue lists it
// exactly when it is ready: for the admin calls, the expiries Reap and
// Inspect find, and the hand-offs.
func TestPullQueueFollowsEveryCall(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	m, err := New(WithClock(clk), WithLeaseTTL(10*time.Second), WithMaxRetries(1))
	require.NoError(t, err)
	defer m.Close()
	must := func(_ any, err error) {
		t.Helper()
		require.NoError(t, err)
		require.NoError(t, m.checkInvariants())
	}
	must(m.Enqueue("a", 1, nil))
	must(m.Enqueue("a", 2, nil))
	must(nil, m.Pause("a"))
	must(m.Resume("a"))
	res, err := m.TryAcquire("a", 1)
	must(res, err)
	must(m.ForceRelease("a"))
	must(m.Kill("a", 1, "poison"))
	must(m.Redrive("a", 1))
	res, err = m.TryAcquire("a", 1)
	must(res, err)
	clk.now = clk.now.Add(10 * time.Second)
	must(m.Reap())
	must(m.TryAcquire("a", 1))
	clk.now = clk.now.Add(10 * time.Second)
	must(m.Inspect("a")) // its last attempt: a dead letter, and a/2 ready
	cs, err := m.Claim(1)
	must(cs, err)
	require.Len(t, cs, 1)
	must(m.SucceedNext("a", cs[0].Token))
	must(nil, m.Forget("a"))
}

// fakeClock is a Clock tests set by hand; it is not safe for concurrent
// use.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
