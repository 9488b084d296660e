package workleaseprom_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/workleaseprom"
)

// clock is a fake clock for a Collector.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newCollector returns a Collector on a fake clock.
func newCollector(t *testing.T, opts workleaseprom.Options) (*workleaseprom.Collector, *clock) {
	t.Helper()
	c := workleaseprom.New(opts)
	clk := &clock{now: time.Unix(1000, 0)}
	workleaseprom.SetNow(c, clk.Now)
	return c, clk
}

func token(t *testing.T, fence uint64) worklease.Token {
	t.Helper()
	tok, err := worklease.NewToken(fence, 1, 1)
	require.NoError(t, err)
	return tok
}

func ev(kind worklease.EventKind, domain string, tok worklease.Token) worklease.Event {
	return worklease.Event{Kind: kind, Domain: domain, Offset: 1, Token: tok}
}

func TestCountsEveryKind(t *testing.T) {
	t.Parallel()
	c, _ := newCollector(t, workleaseprom.Options{})
	for _, k := range []worklease.EventKind{
		worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventAcquired,
		worklease.EventProcessed, worklease.EventRejected, worklease.EventKind(99),
	} {
		c.Observe(ev(k, "a", worklease.Token{}))
	}
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP worklease_events_total Transitions of work leases, by kind.
# TYPE worklease_events_total counter
worklease_events_total{kind="Acquired"} 1
worklease_events_total{kind="Enqueued"} 2
worklease_events_total{kind="EventKind(99)"} 1
worklease_events_total{kind="Processed"} 1
worklease_events_total{kind="Rejected"} 1
`), "worklease_events_total"))
}

// An attempt is timed from its EventStarted to the first event that ends
// the same domain's lease under the same token, by the kind of that event.
func TestTimesAttempts(t *testing.T) {
	t.Parallel()
	c, clk := newCollector(t, workleaseprom.Options{Buckets: []float64{1, 10}})
	a1, a2, b1 := token(t, 1), token(t, 2), token(t, 1)

	c.Observe(ev(worklease.EventStarted, "a", a1))
	c.Observe(ev(worklease.EventStarted, "b", b1))
	assert.Equal(t, 2.0, inFlight(t, c))
	clk.Advance(500 * time.Millisecond)
	c.Observe(ev(worklease.EventProcessed, "a", a2)) // another lease's: not this attempt's end
	assert.Equal(t, 2.0, inFlight(t, c))
	c.Observe(ev(worklease.EventRetrying, "a", a1)) // 0.5 s
	c.Observe(ev(worklease.EventStarted, "a", a1))  // the retry, under the same lease
	clk.Advance(2 * time.Second)
	c.Observe(ev(worklease.EventProcessed, "a", a1))    // 2 s
	c.Observe(ev(worklease.EventDeadLettered, "a", a1)) // ended already: not timed again
	assert.Equal(t, 1.0, inFlight(t, c))
	clk.Advance(20 * time.Second)
	c.Observe(ev(worklease.EventExpired, "b", b1))   // 22.5 s
	c.Observe(ev(worklease.EventLeaseLost, "b", b1)) // its handler learns it later: not timed again
	assert.Equal(t, 0.0, inFlight(t, c))

	c.Observe(ev(worklease.EventStarted, "c", b1))
	clk.Advance(time.Second)
	c.Observe(ev(worklease.EventLeaseLost, "c", b1)) // 1 s
	c.Observe(ev(worklease.EventStarted, "d", b1))
	c.Observe(ev(worklease.EventDeadLettered, "d", b1)) // 0 s

	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP worklease_handler_duration_seconds How long handlers ran, from the start of an attempt to its end, by the event that ended it.
# TYPE worklease_handler_duration_seconds histogram
worklease_handler_duration_seconds_bucket{outcome="DeadLettered",le="1"} 1
worklease_handler_duration_seconds_bucket{outcome="DeadLettered",le="10"} 1
worklease_handler_duration_seconds_bucket{outcome="DeadLettered",le="+Inf"} 1
worklease_handler_duration_seconds_sum{outcome="DeadLettered"} 0
worklease_handler_duration_seconds_count{outcome="DeadLettered"} 1
worklease_handler_duration_seconds_bucket{outcome="Expired",le="1"} 0
worklease_handler_duration_seconds_bucket{outcome="Expired",le="10"} 0
worklease_handler_duration_seconds_bucket{outcome="Expired",le="+Inf"} 1
worklease_handler_duration_seconds_sum{outcome="Expired"} 22.5
worklease_handler_duration_seconds_count{outcome="Expired"} 1
worklease_handler_duration_seconds_bucket{outcome="LeaseLost",le="1"} 1
worklease_handler_duration_seconds_bucket{outcome="LeaseLost",le="10"} 1
worklease_handler_duration_seconds_bucket{outcome="LeaseLost",le="+Inf"} 1
worklease_handler_duration_seconds_sum{outcome="LeaseLost"} 1
worklease_handler_duration_seconds_count{outcome="LeaseLost"} 1
worklease_handler_duration_seconds_bucket{outcome="Processed",le="1"} 0
worklease_handler_duration_seconds_bucket{outcome="Processed",le="10"} 1
worklease_handler_duration_seconds_bucket{outcome="Processed",le="+Inf"} 1
worklease_handler_duration_seconds_sum{outcome="Processed"} 2
worklease_handler_duration_seconds_count{outcome="Processed"} 1
worklease_handler_duration_seconds_bucket{outcome="Retrying",le="1"} 1
worklease_handler_duration_seconds_bucket{outcome="Retrying",le="10"} 1
worklease_handler_duration_seconds_bucket{outcome="Retrying",le="+Inf"} 1
worklease_handler_duration_seconds_sum{outcome="Retrying"} 0.5
worklease_handler_duration_seconds_count{outcome="Retrying"} 1
`), "worklease_handler_duration_seconds"))
}

func inFlight(t *testing.T, c *workleaseprom.Collector) float64 {
	t.Helper()
	return value(t, c, "worklease_in_flight")
}

// value returns the value of the gauge or counter c exports as name, for
// the series with the given "kind" label, if any.
func value(t *testing.T, c prometheus.Collector, name string, kind ...string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(kind) > 0 && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != kind[0]) {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s %q", name, kind)
	return 0
}

// histogramCount returns the number of durations c observed with outcome.
func histogramCount(t *testing.T, c prometheus.Collector, outcome string) uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "worklease_handler_duration_seconds" && m.GetLabel()[0].GetValue() == outcome {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// The event that ends an attempt may come after the pool started the
// domain's next one, or several: each is timed under its own token.
func TestEndsAfterNextStarts(t *testing.T) {
	t.Parallel()
	c, clk := newCollector(t, workleaseprom.Options{})
	const n = 20
	for fence := range uint64(n) {
		c.Observe(ev(worklease.EventStarted, "a", token(t, fence+1)))
		clk.Advance(time.Second)
	}
	assert.Equal(t, float64(n), inFlight(t, c))
	for fence := range uint64(n) {
		c.Observe(ev(worklease.EventRetrying, "a", token(t, fence+1)))
	}
	assert.Equal(t, 0.0, inFlight(t, c))
	assert.Equal(t, uint64(n), histogramCount(t, c, "Retrying"))
	assert.Equal(t, 0.0, value(t, c, "worklease_handler_untracked_total"))
}

// Retries under one lease share its token: each end ends the oldest.
func TestRetriesUnderOneToken(t *testing.T) {
	t.Parallel()
	c, clk := newCollector(t, workleaseprom.Options{Buckets: []float64{1.5}})
	tok := token(t, 1)
	c.Observe(ev(worklease.EventStarted, "a", tok))
	clk.Advance(time.Second)
	c.Observe(ev(worklease.EventStarted, "a", tok)) // before the first attempt's end came
	clk.Advance(time.Second)
	c.Observe(ev(worklease.EventRetrying, "a", tok))  // the first: 2 s
	c.Observe(ev(worklease.EventProcessed, "a", tok)) // the second: 1 s
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP worklease_handler_duration_seconds How long handlers ran, from the start of an attempt to its end, by the event that ended it.
# TYPE worklease_handler_duration_seconds histogram
worklease_handler_duration_seconds_bucket{outcome="Processed",le="1.5"} 1
worklease_handler_duration_seconds_bucket{outcome="Processed",le="+Inf"} 1
worklease_handler_duration_seconds_sum{outcome="Processed"} 1
worklease_handler_duration_seconds_count{outcome="Processed"} 1
worklease_handler_duration_seconds_bucket{outcome="Retrying",le="1.5"} 0
worklease_handler_duration_seconds_bucket{outcome="Retrying",le="+Inf"} 1
worklease_handler_duration_seconds_sum{outcome="Retrying"} 2
worklease_handler_duration_seconds_count{outcome="Retrying"} 1
`), "worklease_handler_duration_seconds"))
}

// Attempts whose end never comes are dropped when their domain is
// forgotten.
func TestForgetsAttemptsThatNeverEnd(t *testing.T) {
	t.Parallel()
	c, _ := newCollector(t, workleaseprom.Options{})
	c.Observe(ev(worklease.EventStarted, "a", token(t, 1)))
	c.Observe(ev(worklease.EventStarted, "a", token(t, 2)))
	c.Observe(ev(worklease.EventStarted, "b", token(t, 1)))
	c.Observe(ev(worklease.EventForgotten, "a", worklease.Token{}))
	assert.Equal(t, 1.0, inFlight(t, c))
	c.Observe(ev(worklease.EventProcessed, "a", token(t, 2)))
	assert.Equal(t, 1.0, inFlight(t, c))
	assert.Zero(t, histogramCount(t, c, "Processed"))
	assert.Equal(t, 0.0, value(t, c, "worklease_handler_untracked_total"))
}

// Beyond MaxTracked attempts, starting one more stops timing another.
func TestBoundsTrackedAttempts(t *testing.T) {
	t.Parallel()
	c, _ := newCollector(t, workleaseprom.Options{MaxTracked: 2})
	for _, d := range []string{"a", "b", "c", "d", "a"} {
		c.Observe(ev(worklease.EventStarted, d, token(t, 1)))
	}
	assert.Equal(t, 2.0, inFlight(t, c))
	assert.Equal(t, 3.0, value(t, c, "worklease_handler_untracked_total"))
}

func TestQueued(t *testing.T) {
	t.Parallel()
	queued := 7.0
	c, _ := newCollector(t, workleaseprom.Options{Queued: func() float64 { return queued }})
	assert.Equal(t, 7.0, value(t, c, "worklease_queued"))
	queued = 9
	assert.Equal(t, 9.0, value(t, c, "worklease_queued"))

	c, _ = newCollector(t, workleaseprom.Options{})
	assert.Zero(t, testutil.CollectAndCount(c, "worklease_queued"), "no gauge without Options.Queued")
}

// Every metric is described, carries the constant labels and the
// namespace, and passes a pedantic registry's checks.
func TestOptions(t *testing.T) {
	t.Parallel()
	c, _ := newCollector(t, workleaseprom.Options{
		Namespace: "orders", ConstLabels: prometheus.Labels{"pool": "p1"}, Queued: func() float64 { return 3 },
	})
	c.Observe(ev(worklease.EventStarted, "a", token(t, 1)))
	c.Observe(ev(worklease.EventProcessed, "a", token(t, 1)))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			assert.Equal(t, "p1", labels["pool"], mf.GetName())
		}
	}
	assert.Equal(t, []string{
		"orders_events_total", "orders_handler_duration_seconds", "orders_handler_untracked_total",
		"orders_in_flight", "orders_queued",
	}, names)
	assert.Equal(t, 6, testutil.CollectAndCount(c), "two kinds of events, and a series for each other metric")
}

// Many goroutines observe at once, as a pool's workers and a backend do,
// while the collector is scraped.
func TestConcurrentObserve(t *testing.T) {
	t.Parallel()
	c := workleaseprom.New(workleaseprom.Options{})
	const goroutines, attempts = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			domain := fmt.Sprint("d", g)
			for i := range attempts {
				tok := token(t, uint64(i+1))
				c.Observe(ev(worklease.EventStarted, domain, tok))
				c.Observe(ev(worklease.EventProcessed, domain, tok))
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			testutil.CollectAndCount(c)
		}
	})
	wg.Wait()
	assert.Equal(t, 0.0, inFlight(t, c))
	assert.Equal(t, float64(goroutines*attempts), value(t, c, "worklease_events_total", "Processed"))
}
