package workleaseprom

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/worklease/worklease"
)

// DefaultMaxTracked is the default of Options.MaxTracked.
const DefaultMaxTracked = 100_000

// Options configure a Collector. The zero value is valid.
type Options struct {
	// Namespace is the first part of every metric's name; "worklease" if
	// empty.
	Namespace string
	// ConstLabels are added to every metric, e.g. to tell two pools apart.
	ConstLabels prometheus.Labels
	// Buckets are the handler duration histogram's upper bounds, in
	// seconds; prometheus.DefBuckets (5 ms to 10 s) if nil.
	Buckets []float64
	// Queued, if not nil, is called at every scrape for the queued gauge,
	// such as func() float64 { return float64(pool.Stats().Queued) }. It
	// is called from the scraping goroutine and must be safe for that.
	Queued func() float64
	// MaxTracked bounds the attempts the Collector is timing at once;
	// DefaultMaxTracked if zero or less. An attempt whose end the
	// Collector is never told about (its process lost the event, or the
	// attempt never ends) stays tracked until its domain is forgotten;
	// should such attempts fill MaxTracked, starting one more stops the
	// timing of an arbitrary domain's oldest, counted in
	// worklease_handler_untracked_total. Only lost events get there: a
	// pool runs no more attempts at once than it has workers.
	MaxTracked int
}

// A Collector turns worklease events into Prometheus metrics. Make one with
// New; it is safe for concurrent use.
type Collector struct {
	events    *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	untracked prometheus.Counter
	inFlight  prometheus.GaugeFunc
	queued    prometheus.GaugeFunc // nil without Options.Queued

	maxTracked int
	now        func() time.Time // time.Now, but for tests

	mu      sync.Mutex           // guards started and tracked
	started map[string][]started // attempts under way, by domain, oldest first
	tracked int                  // the attempts in started
}

// started is an attempt being timed.
type started struct {
	token worklease.Token
	at    time.Time
}

var (
	_ worklease.Observer   = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// New returns a Collector configured by opts. It registers nothing: pass it
// to prometheus.MustRegister, or to a registry of your own.
func New(opts Options) *Collector {
	ns := opts.Namespace
	if ns == "" {
		ns = "worklease"
	}
	c := &Collector{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "events_total", ConstLabels: opts.ConstLabels,
			Help: "Transitions of work leases, by kind.",
		}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "handler_duration_seconds", ConstLabels: opts.ConstLabels, Buckets: opts.Buckets,
			Help: "How long handlers ran, from the start of an attempt to its end, by the event that ended it.",
		}, []string{"outcome"}),
		untracked: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "handler_untracked_total", ConstLabels: opts.ConstLabels,
			Help: "Attempts no longer timed, to bound the memory of attempts whose end was never reported.",
		}),
		maxTracked: opts.MaxTracked,
		now:        time.Now,
		started:    map[string][]started{},
	}
	if c.maxTracked <= 0 {
		c.maxTracked = DefaultMaxTracked
	}
	c.inFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Name: "in_flight", ConstLabels: opts.ConstLabels,
		Help: "Handlers started and not ended.",
	}, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(c.tracked)
	})
	if opts.Queued != nil {
		c.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns, Name: "queued", ConstLabels: opts.ConstLabels,
			Help: "Work waiting for a worker.",
		}, opts.Queued)
	}
	return c
}

// Observe counts e, and times the attempt it starts or ends. An attempt
// starts with EventStarted and ends with the first of EventProcessed,
// EventRetrying, EventDeadLettered, EventExpired and EventLeaseLost that
// names the same domain and token. Its duration is measured by the clock of
// the process when the events reach Observe, not from Event.At, which the
// backend and the pool may read from different clocks (a database's, say);
// a backend may deliver an event a moment after the call that made it
// returned, which then counts in the duration.
func (c *Collector) Observe(e worklease.Event) {
	c.events.WithLabelValues(e.Kind.String()).Inc()
	switch e.Kind {
	case worklease.EventStarted:
		c.start(e.Domain, e.Token)
	case worklease.EventProcessed, worklease.EventRetrying, worklease.EventDeadLettered,
		worklease.EventExpired, worklease.EventLeaseLost:
		c.end(e.Domain, e.Token, e.Kind)
	case worklease.EventForgotten:
		c.mu.Lock()
		c.tracked -= len(c.started[e.Domain])
		delete(c.started, e.Domain)
		c.mu.Unlock()
	}
}

// start times an attempt of domain under tok.
func (c *Collector) start(domain string, tok worklease.Token) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tracked >= c.maxTracked {
		for d := range c.started { // an arbitrary domain: map order
			c.dropOldest(d)
			break
		}
	}
	c.started[domain] = append(c.started[domain], started{token: tok, at: now})
	c.tracked++
}

// dropOldest stops timing domain's oldest attempt; c.mu is held.
func (c *Collector) dropOldest(domain string) {
	c.remove(domain, 0)
	c.untracked.Inc()
}

// remove stops timing domain's i-th attempt; c.mu is held.
func (c *Collector) remove(domain string, i int) {
	ss := c.started[domain]
	if len(ss) == 1 {
		delete(c.started, domain)
	} else {
		c.started[domain] = slices.Delete(ss, i, i+1)
	}
	c.tracked--
}

// end ends the oldest attempt of domain under tok, if one is being timed.
// A domain runs one attempt at a time, but the event that ends one may
// reach the Collector after the pool started the next, or several: the
// backend delivers a domain's events in order, but not always before the
// call that made them returns. So a domain may have several attempts
// tracked, each under its own token, or under the same one for retries
// under one lease, whose events come in order.
func (c *Collector) end(domain string, tok worklease.Token, outcome worklease.EventKind) {
	now := c.now()
	c.mu.Lock()
	var s started
	i := slices.IndexFunc(c.started[domain], func(s started) bool { return s.token == tok })
	if i >= 0 {
		s = c.started[domain][i]
		c.remove(domain, i)
	}
	c.mu.Unlock()
	if i >= 0 {
		c.duration.WithLabelValues(outcome.String()).Observe(now.Sub(s.at).Seconds())
	}
}

// Describe sends the descriptions of c's metrics to ch.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.events.Describe(ch)
	c.duration.Describe(ch)
	c.untracked.Describe(ch)
	c.inFlight.Describe(ch)
	if c.queued != nil {
		c.queued.Describe(ch)
	}
}

// Collect sends c's metrics to ch.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.events.Collect(ch)
	c.duration.Collect(ch)
	c.untracked.Collect(ch)
	c.inFlight.Collect(ch)
	if c.queued != nil {
		c.queued.Collect(ch)
	}
}
