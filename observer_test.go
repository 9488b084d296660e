package worklease_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

// Tests of WithObserver: the outcome of every attempt, told as an event, and
// the delivery guarantees the option documents.

// recorder is an Observer that keeps every event it is told about.
type recorder struct {
	mu  sync.Mutex
	evs []worklease.Event
}

func (r *recorder) Observe(e worklease.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) events() []worklease.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

func (r *recorder) kinds() []worklease.EventKind {
	var out []worklease.EventKind
	for _, e := range r.events() {
		out = append(out, e.Kind)
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.evs = nil
	r.mu.Unlock()
}

// ev is an Event with its cause as text, so that events compare with ==.
type ev struct {
	Kind    worklease.EventKind
	Domain  string
	Offset  int64
	Attempt int
	Token   worklease.Token
	Cause   string
	At      time.Time
}

func evs(events []worklease.Event) []ev {
	out := make([]ev, 0, len(events))
	for _, e := range events {
		cause := ""
		if e.Cause != nil {
			cause = e.Cause.Error()
		}
		out = append(out, ev{e.Kind, e.Domain, e.Offset, e.Attempt, e.Token, cause, e.At})
	}
	return out
}

// The exact events of a scripted scenario that goes through every kind:
// kinds, offsets, attempts, tokens, causes and times from the fake clock.
func TestObserverEventSequence(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	m, clk := newManager(t, worklease.WithLeaseTTL(30*time.Second), worklease.WithMaxRetries(1), worklease.WithObserver(rec))
	t0 := epoch
	expired := worklease.ErrLeaseExpired.Error()

	tok1 := acquire(t, m, "A", 1, worklease.Acquired).Token
	acquire(t, m, "A", 2, worklease.Enqueued)
	acquire(t, m, "A", 2, worklease.Enqueued)        // a duplicate: no event
	acquire(t, m, "A", 1, worklease.AlreadyAcquired) // no event
	t5 := clk.Advance(5 * time.Second)
	_, err := m.Fail("A", tok1, errors.New("boom"))
	require.NoError(t, err)
	t10 := clk.Advance(5 * time.Second)
	_, err = m.Extend("A", tok1, time.Minute) // to t70
	require.NoError(t, err)
	_, err = m.Extend("A", tok1, time.Second) // no change: no event
	require.NoError(t, err)
	t70 := clk.Advance(time.Minute)
	_, err = m.Reap() // the second attempt expires: out of retries
	require.NoError(t, err)
	_, err = m.Succeed("A", tok1)
	require.ErrorIs(t, err, worklease.ErrLeaseExpired)
	tok2 := acquire(t, m, "A", 2, worklease.Acquired).Token
	t71 := clk.Advance(time.Second)
	_, err = m.Succeed("A", tok2)
	require.NoError(t, err)
	require.NoError(t, m.Pause("A"))
	require.NoError(t, m.Pause("A")) // already paused: no event
	_, err = m.Resume("A")
	require.NoError(t, err)
	_, err = m.Redrive("A", 1)
	require.NoError(t, err)
	tok3 := acquire(t, m, "A", 1, worklease.Acquired).Token
	_, err = m.ForceRelease("A")
	require.NoError(t, err)
	tok4 := acquire(t, m, "A", 1, worklease.Acquired).Token
	_, err = m.Kill("A", 1, "operator")
	require.NoError(t, err)
	require.NoError(t, m.Forget("A"))

	none := worklease.Token{}
	require.Equal(t, []ev{
		{worklease.EventAcquired, "A", 1, 1, tok1, "", t0},
		{worklease.EventEnqueued, "A", 2, 0, none, "", t0},
		{worklease.EventRetrying, "A", 1, 1, tok1, "boom", t5},
		{worklease.EventExtended, "A", 1, 2, tok1, "", t10},
		{worklease.EventExpired, "A", 1, 2, tok1, "", t70},
		{worklease.EventDeadLettered, "A", 1, 2, tok1, expired, t70},
		{worklease.EventRejected, "A", -1, 0, tok1, expired, t70},
		{worklease.EventAcquired, "A", 2, 1, tok2, "", t70},
		{worklease.EventProcessed, "A", 2, 1, tok2, "", t71},
		{worklease.EventPaused, "A", -1, 0, none, "", t71},
		{worklease.EventResumed, "A", -1, 0, none, "", t71},
		{worklease.EventRedriven, "A", 1, 0, none, "", t71},
		{worklease.EventAcquired, "A", 1, 1, tok3, "", t71},
		{worklease.EventReleased, "A", 1, 1, tok3, "", t71},
		{worklease.EventRequeued, "A", 1, 1, none, "", t71}, // one attempt made, none failed
		{worklease.EventAcquired, "A", 1, 2, tok4, "", t71}, // the second attempt
		{worklease.EventKilled, "A", 1, 2, tok4, "operator", t71},
		{worklease.EventDeadLettered, "A", 1, 2, tok4, "operator", t71},
		{worklease.EventForgotten, "A", -1, 0, none, "", t71},
	}, evs(rec.events()))

	var causes []error
	for _, e := range rec.events() {
		if e.Kind == worklease.EventDeadLettered || e.Kind == worklease.EventRejected {
			causes = append(causes, e.Cause)
		}
	}
	require.ErrorIs(t, causes[0], worklease.ErrLeaseExpired, "the sentinel itself, for errors.Is")
	require.ErrorIs(t, causes[1], worklease.ErrLeaseExpired)

	// Every event is counted in Stats too.
	require.Equal(t, worklease.Stats{
		Acquired: 4, Enqueued: 1, Processed: 1, Retried: 1, DeadLettered: 2, Expired: 1, Requeued: 1, Extended: 1,
		Rejected: 1, Killed: 1, Redriven: 1, Released: 1, Paused: 1, Resumed: 1, Forgotten: 1,
	}, m.Stats())
}

func TestEventKindStrings(t *testing.T) {
	t.Parallel()
	want := map[worklease.EventKind]string{
		worklease.EventAcquired:     "Acquired",
		worklease.EventEnqueued:     "Enqueued",
		worklease.EventProcessed:    "Processed",
		worklease.EventRetrying:     "Retrying",
		worklease.EventDeadLettered: "DeadLettered",
		worklease.EventExpired:      "Expired",
		worklease.EventRequeued:     "Requeued",
		worklease.EventExtended:     "Extended",
		worklease.EventRejected:     "Rejected",
		worklease.EventOutOfOrder:   "OutOfOrder",
		worklease.EventKilled:       "Killed",
		worklease.EventRedriven:     "Redriven",
		worklease.EventReleased:     "Released",
		worklease.EventPaused:       "Paused",
		worklease.EventResumed:      "Resumed",
		worklease.EventForgotten:    "Forgotten",
		worklease.EventStarted:      "Started",
		worklease.EventLeaseLost:    "LeaseLost",
		worklease.EventKind(0):      "EventKind(0)",
		worklease.EventKind(200):    "EventKind(200)",
	}
	for k, s := range want {
		require.Equal(t, s, k.String())
	}
}

// An outcome is an event: when a message completes with success or failure,
// an event carries the message identifier (domain and offset), its status
// (processed, retrying, dead-lettered) and the attempt count.
func TestEmitProcessingOutcomeEvent(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	boom := errors.New("boom")
	tests := []struct {
		name string
		// run acquires offset 42 of "orders" (already failed once) and
		// completes it.
		run  func(t *testing.T, m *worklease.Manager, clk *clock.Fake, tok worklease.Token)
		want worklease.Event
	}{
		{"processed", func(t *testing.T, m *worklease.Manager, _ *clock.Fake, tok worklease.Token) {
			_, err := m.Succeed("orders", tok)
			require.NoError(t, err)
		}, worklease.Event{Kind: worklease.EventProcessed, Domain: "orders", Offset: 42, Attempt: 2}},
		{"retrying", func(t *testing.T, m *worklease.Manager, _ *clock.Fake, tok worklease.Token) {
			_, err := m.Fail("orders", tok, boom)
			require.NoError(t, err)
		}, worklease.Event{Kind: worklease.EventRetrying, Domain: "orders", Offset: 42, Attempt: 2, Cause: boom}},
		{"dead-lettered by Fail", func(t *testing.T, m *worklease.Manager, _ *clock.Fake, tok worklease.Token) {
			_, err := m.Fail("orders", tok, boom)
			require.NoError(t, err)
			_, err = m.Fail("orders", tok, boom)
			require.NoError(t, err)
		}, worklease.Event{Kind: worklease.EventDeadLettered, Domain: "orders", Offset: 42, Attempt: 3, Cause: boom}},
		{"dead-lettered by expiry", func(t *testing.T, m *worklease.Manager, clk *clock.Fake, tok worklease.Token) {
			_, err := m.Fail("orders", tok, boom)
			require.NoError(t, err)
			clk.Advance(ttl)
			_, err = m.Reap()
			require.NoError(t, err)
		}, worklease.Event{Kind: worklease.EventDeadLettered, Domain: "orders", Offset: 42, Attempt: 3, Cause: worklease.ErrLeaseExpired}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			m, clk := newManager(t, worklease.WithMaxRetries(2), worklease.WithLeaseTTL(ttl), worklease.WithObserver(rec))
			tok := acquire(t, m, "orders", 42, worklease.Acquired).Token
			_, err := m.Fail("orders", tok, errors.New("first"))
			require.NoError(t, err)
			rec.reset()

			tt.run(t, m, clk, tok)
			got := rec.events()
			require.NotEmpty(t, got)
			last := got[len(got)-1]
			want := tt.want
			want.Token, want.At = tok, clk.Now()
			require.Equal(t, want, last)
		})
	}
}

// Events of one domain are delivered in the order they happened, even with
// many goroutines working on few domains: each domain's events read as
// Acquired, then any Retrying, then Processed, for one offset after another,
// with growing fences.
func TestObserverPerDomainOrder(t *testing.T) {
	t.Parallel()
	const (
		domains = 3
		workers = 12
		offsets = 150
	)
	var mu sync.Mutex
	perDomain := map[string][]worklease.Event{}
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		mu.Lock()
		perDomain[e.Domain] = append(perDomain[e.Domain], e)
		mu.Unlock()
	})
	m, _ := newManager(t, worklease.WithObserver(obs), worklease.WithMaxRetries(1<<20), worklease.WithShards(1))

	var cursors [domains]atomic.Int64
	var remaining atomic.Int64
	remaining.Store(domains)
	var failed atomic.Value
	// advance moves domain d's cursor past off, once, whichever worker
	// learns first that off is done.
	advance := func(d int, off int64) {
		if cursors[d].CompareAndSwap(off, off+1) && off+1 == offsets {
			remaining.Add(-1)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; remaining.Load() > 0 && failed.Load() == nil; i++ {
				d := i % domains
				off := cursors[d].Load()
				if off >= offsets {
					runtime.Gosched()
					continue
				}
				name := fmt.Sprint("d", d)
				res, err := m.TryAcquire(name, off)
				if err != nil {
					failed.Store(err)
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
				for range i % 3 { // zero to two retries
					if _, err := m.Fail(name, res.Token, nil); err != nil {
						failed.Store(err)
						return
					}
				}
				if _, err := m.Succeed(name, res.Token); err != nil {
					failed.Store(err)
					return
				}
				advance(d, off)
			}
		})
	}
	wg.Wait()
	require.Nil(t, failed.Load())

	mu.Lock()
	defer mu.Unlock()
	var total uint64
	for d := range domains {
		name := fmt.Sprint("d", d)
		got := perDomain[name]
		total += uint64(len(got))
		var want int64 // the offset whose events come next
		var lastFence uint64
		for i := 0; i < len(got); {
			acq := got[i]
			require.Equal(t, worklease.EventAcquired, acq.Kind, "%s event %d: %+v", name, i, acq)
			require.Equal(t, want, acq.Offset, "%s event %d", name, i)
			require.Equal(t, 1, acq.Attempt)
			require.Greater(t, acq.Token.Fence(), lastFence)
			lastFence = acq.Token.Fence()
			i++
			retries := 0
			for i < len(got) && got[i].Kind == worklease.EventRetrying {
				retries++
				require.Equal(t, ev{worklease.EventRetrying, name, want, retries, acq.Token, "", time.Time{}},
					ev{got[i].Kind, got[i].Domain, got[i].Offset, got[i].Attempt, got[i].Token, "", time.Time{}})
				i++
			}
			require.Less(t, i, len(got), "%s: offset %d never processed", name, want)
			require.Equal(t, ev{worklease.EventProcessed, name, want, retries + 1, acq.Token, "", time.Time{}},
				ev{got[i].Kind, got[i].Domain, got[i].Offset, got[i].Attempt, got[i].Token, "", time.Time{}})
			i++
			want++
		}
		require.Equal(t, int64(offsets), want, name)
	}
	st := m.Stats()
	require.Equal(t, st.Acquired+st.Retried+st.Processed, total, "every counted event was delivered")
	require.Equal(t, uint64(domains*offsets), st.Processed)
}

// An observer may call back into the same domain from inside Observe
// without deadlocking (events are delivered after the lock is released); the
// events of its call are delivered after Observe returns.
func TestObserverCallsBackIntoSameDomain(t *testing.T) {
	t.Parallel()
	var m *worklease.Manager
	var log []string // only the delivering goroutine writes it
	var nested worklease.AcquireResult
	var nestedInfo worklease.DomainInfo
	var nestedErr error
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		log = append(log, fmt.Sprintf("%v %d", e.Kind, e.Offset))
		if e.Kind == worklease.EventProcessed && e.Offset == 1 {
			nestedInfo, nestedErr = m.Inspect("A")
			if nestedErr == nil {
				nested, nestedErr = m.TryAcquire("A", 2)
			}
			log = append(log, "nested call returned")
		}
	})
	m, _ = newManager(t, worklease.WithObserver(obs))

	first := acquire(t, m, "A", 1, worklease.Acquired)
	acquire(t, m, "A", 2, worklease.Enqueued)
	sres, err := m.Succeed("A", first.Token)
	require.NoError(t, err)
	require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, sres)

	require.NoError(t, nestedErr)
	require.Equal(t, worklease.DomainInfo{Processed: 1, Backlog: []int64{2}}, nestedInfo, "the observer sees the state after the transition")
	require.Equal(t, worklease.Acquired, nested.Status)
	require.Equal(t, []string{
		"Acquired 1", "Enqueued 2", "Processed 1", "nested call returned", "Acquired 2",
	}, log)
	info := inspect(t, m, "A")
	require.Equal(t, nested.Token, info.Lease.Token)
}

// A panicking observer's panic reaches the caller whose call caused the
// event; the Manager stays consistent, and later events are still delivered.
func TestObserverPanicPropagates(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	var panicked atomic.Bool
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		rec.Observe(e)
		if e.Kind == worklease.EventProcessed && !panicked.Swap(true) {
			panic("observer boom")
		}
	})
	m, _ := newManager(t, worklease.WithObserver(obs))
	first := acquire(t, m, "A", 1, worklease.Acquired)
	acquire(t, m, "A", 2, worklease.Enqueued)

	require.PanicsWithValue(t, "observer boom", func() { _, _ = m.Succeed("A", first.Token) })

	require.Equal(t, worklease.DomainInfo{Processed: 1, Backlog: []int64{2}}, inspect(t, m, "A"), "the transition happened")
	require.NoError(t, worklease.CheckInvariants(m))
	acquire(t, m, "A", 1, worklease.AlreadyProcessed)

	rec.reset()
	second := acquire(t, m, "A", 2, worklease.Acquired)
	_, err := m.Succeed("A", second.Token)
	require.NoError(t, err)
	require.Equal(t, []worklease.EventKind{worklease.EventAcquired, worklease.EventProcessed}, rec.kinds(),
		"later events are delivered")
}

// An observer that panics while Reap delivers the events of one expiry must
// not leave the other due leases half-handled: Reap handles every due lease
// before it delivers any event, so all are revoked and requeued, the
// invariants hold, and the events the panic held back are delivered when
// their domains are next touched. (One shard puts every lease in one index.)
func TestObserverPanicDuringReapKeepsOtherExpiries(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	var panicked atomic.Value // the domain whose expiry panicked
	var mu sync.Mutex
	expired := map[string]int{}
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		if e.Kind != worklease.EventExpired {
			return
		}
		if panicked.CompareAndSwap(nil, e.Domain) {
			panic("observer boom")
		}
		mu.Lock()
		expired[e.Domain]++
		mu.Unlock()
	})
	m, clk := newManager(t, worklease.WithObserver(obs), worklease.WithLeaseTTL(ttl), worklease.WithShards(1))
	all := []string{"a", "b", "c"}
	for _, d := range all {
		acquire(t, m, d, 1, worklease.Acquired)
	}
	clk.Advance(ttl)
	require.PanicsWithValue(t, "observer boom", func() { _, _ = m.Reap() })
	require.NoError(t, worklease.CheckInvariants(m))

	exp, err := m.Reap()
	require.NoError(t, err)
	require.Empty(t, exp, "every due lease was handled before the panic")
	for _, d := range all {
		info := inspect(t, m, d) // a touch: delivers what the panic held back
		require.False(t, info.Leased, d)
		require.Equal(t, []int64{1}, info.Backlog, "%s's offset is back at the front", d)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, d := range all {
		if d != panicked.Load() {
			require.Equal(t, 1, expired[d], "%s's expiry is delivered once", d)
		}
	}
}

// When an observer panics, the events after the one it panicked on are
// not lost: they go out, in order, with the domain's next delivery.
func TestObserverPanicKeepsTheRestOfTheBatch(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var kinds []worklease.EventKind
	panicked := false
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == worklease.EventDeadLettered && !panicked {
			panicked = true
			panic("observer boom")
		}
		kinds = append(kinds, e.Kind)
	})
	m, _ := newManager(t, worklease.WithObserver(obs), worklease.WithMaxRetries(0), worklease.WithParkOnDeadLetter())
	res := acquire(t, m, "A", 1, worklease.Acquired)
	require.PanicsWithValue(t, "observer boom", func() { _, _ = m.Fail("A", res.Token, nil) })
	acquire(t, m, "A", 2, worklease.Enqueued) // parked: queues
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []worklease.EventKind{worklease.EventAcquired, worklease.EventPaused, worklease.EventEnqueued}, kinds)
}

// TestObserverUnknownDomainIsNoEvent checks that Succeed, Fail and Extend
// on a domain the Manager does not know (never seen, or forgotten) return
// ErrNoLease and report nothing: not from inside the observer, where an
// event would reach it before its own call returned, and not while a
// forgotten domain's last events are still being delivered, which it would
// overtake.
func TestObserverUnknownDomainIsNoEvent(t *testing.T) {
	t.Parallel()
	var (
		mu              sync.Mutex
		kinds           []worklease.EventKind
		depth, maxDepth int
		m               *worklease.Manager
	)
	entered, release := make(chan struct{}), make(chan struct{})
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		mu.Lock()
		kinds = append(kinds, e.Kind)
		depth++
		maxDepth = max(maxDepth, depth)
		mu.Unlock()
		if e.Kind == worklease.EventProcessed {
			// A call from the observer, on a domain that never was.
			_, err := m.Succeed("never", e.Token)
			assert.ErrorIs(t, err, worklease.ErrNoLease)
			close(entered)
			<-release
		}
		mu.Lock()
		depth--
		mu.Unlock()
	})
	m, _ = newManager(t, worklease.WithObserver(obs), worklease.WithLeaseTTL(time.Minute))
	tok := acquire(t, m, "A", 0, worklease.Acquired).Token
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := m.Succeed("A", tok)
		assert.NoError(t, err)
	}()
	<-entered
	// A's Processed event is being delivered: Forget leaves its Forgotten
	// event to that delivery, and calls on the forgotten A must not
	// overtake it.
	require.NoError(t, m.Forget("A"))
	_, err := m.Succeed("A", tok)
	require.ErrorIs(t, err, worklease.ErrNoLease)
	_, err = m.Fail("A", tok, errors.New("boom"))
	require.ErrorIs(t, err, worklease.ErrNoLease)
	_, err = m.Extend("A", tok, time.Minute)
	require.ErrorIs(t, err, worklease.ErrNoLease)
	close(release)
	<-done

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []worklease.EventKind{worklease.EventAcquired, worklease.EventProcessed, worklease.EventForgotten}, kinds)
	require.Equal(t, 1, maxDepth, "the observer was called from inside itself")
	require.Zero(t, m.Stats().Rejected)
}
