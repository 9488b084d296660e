package worklease

import (
	"fmt"
	"time"
)

// Clock is the source of time a Manager reads. Any value with a Now method
// works; tests pass a fake clock to control time.
type Clock interface {
	Now() time.Time
}

// An Option configures a Manager. Options are applied in order by New, which
// validates the result.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// DefaultMaxRetries is the number of retries a Manager allows per offset
// unless WithMaxRetries says otherwise.
const DefaultMaxRetries = 3

// DefaultShards is the number of shards the domain map is split into unless
// WithShards says otherwise.
const DefaultShards = 64

// maxShards bounds WithShards; more shards than this only waste memory.
const maxShards = 1 << 16

type config struct {
	maxRetries int
	shards     int
	clock      Clock // nil means time.Now, called directly
	ttl        time.Duration
	ordering   Ordering
	bestEffort bool
	park       bool
	observer   Observer
	journal    Journal
}

func defaultConfig() config {
	return config{maxRetries: DefaultMaxRetries, shards: DefaultShards, ordering: FIFO}
}

func (c *config) validate() error {
	if c.maxRetries < 0 {
		return fmt.Errorf("%w: WithMaxRetries(%d): must be zero or more", ErrInvalidConfig, c.maxRetries)
	}
	if c.shards < 1 || c.shards > maxShards {
		return fmt.Errorf("%w: WithShards(%d): must be between 1 and %d", ErrInvalidConfig, c.shards, maxShards)
	}
	if c.ttl < 0 {
		return fmt.Errorf("%w: WithLeaseTTL(%v): must be zero (never expire) or positive", ErrInvalidConfig, c.ttl)
	}
	if c.ordering != FIFO && c.ordering != LIFO {
		return fmt.Errorf("%w: WithOrdering(%v): must be FIFO or LIFO", ErrInvalidConfig, c.ordering)
	}
	return nil
}

// WithMaxRetries sets how many times Fail may schedule a retry of one offset
// before the next Fail gives up on it: with n retries an offset gets n+1
// attempts, and the (n+1)th Fail moves it to the failed set. Zero makes the
// first Fail final. The default is DefaultMaxRetries; a negative n makes New
// return an error.
func WithMaxRetries(n int) Option {
	return optionFunc(func(c *config) { c.maxRetries = n })
}

// WithClock makes the Manager read time from c instead of the system clock.
// The Manager calls c.Now outside its locks, so c may take locks of its own.
// A nil c means the system clock, the default.
//
// Times the Manager reports (grant and expiry times, dead-letter and event
// times) are in the time zone of c's reading at New, or the local zone for
// the system clock, at nanosecond precision, clamped to the years 1678 to
// 2262. The system clock is read as its wall time at New advanced by the
// monotonic clock since, so a step of the wall clock (by an administrator
// or NTP) never makes leases expire early or late; it is also cheaper to
// read than time.Now.
func WithClock(c Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock = c })
}

// WithShards sets how many shards the Manager splits its map of domains into;
// each shard has its own lock, so more shards mean less contention when many
// goroutines look up many domains. n is rounded up to a power of two. It must
// be between 1 and 65536; the default is DefaultShards.
func WithShards(n int) Option {
	return optionFunc(func(c *config) { c.shards = n })
}

// WithLeaseTTL makes leases time-limited: a lease expires d after it is
// granted unless Extend renews it, and a Fail that schedules a retry gives
// the next attempt a full d again. An expired lease is revoked the next time
// its domain is touched (or by Reap): its token is then refused with
// ErrLeaseExpired, and its offset goes back to the front of the backlog to be
// granted again under a new token with a higher fence. The expiry counts as
// a failed attempt, so an offset whose workers keep dying is dead-lettered
// after its retries run out, like one that keeps failing.
//
// Zero, the default, means leases never expire (seed 000). A negative d
// makes New return an error.
func WithLeaseTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.ttl = d })
}

// Ordering says which queued offset a domain grants next.
type Ordering uint8

const (
	_ Ordering = iota // the zero value is not an ordering

	// FIFO grants queued offsets in the order they were first enqueued. It
	// is the default.
	FIFO
	// LIFO grants the most recently enqueued offset first.
	LIFO
)

// String returns "FIFO" or "LIFO".
func (o Ordering) String() string {
	switch o {
	case FIFO:
		return "FIFO"
	case LIFO:
		return "LIFO"
	}
	return invalidStatus("Ordering", uint8(o))
}

// WithOrdering sets the order in which each domain's backlog is granted:
// FIFO (the default) or LIFO. Either way, offsets whose lease expired, that
// were force-released or that were redriven go to the front, next in line.
// Any other value makes New return an error.
func WithOrdering(o Ordering) Option {
	return optionFunc(func(c *config) { c.ordering = o })
}

// WithBestEffortOrdering relaxes ordering: an idle domain grants any offset
// asked for, taking it out of the backlog if it is queued there, instead of
// returning a *BacklogOrderError for anything but the backlog's head. Each
// such grant is reported as an EventOutOfOrder and counted in
// Stats.OutOfOrder. The default is strict ordering.
func WithBestEffortOrdering() Option {
	return optionFunc(func(c *config) { c.bestEffort = true })
}

// WithParkOnDeadLetter parks a domain when one of its offsets is
// dead-lettered: the domain keeps its backlog but grants nothing (every
// TryAcquire answers Enqueued) until an operator calls Resume, so that later
// offsets do not run past a failure someone must look at. Fail then returns
// GiveUpParked. The default is seed 000's: give up on the offset and move on.
func WithParkOnDeadLetter() Option {
	return optionFunc(func(c *config) { c.park = true })
}

// WithObserver makes the Manager tell o about every transition of every
// domain (see EventKind). Events are delivered after the domain's lock is
// released, in the order they happened for each domain, by the goroutine
// whose call caused them or by one still delivering that domain's earlier
// events; events of different domains may be delivered concurrently, so o
// must be safe for concurrent use.
//
// o may call the Manager, even on the same domain: its call's events are
// delivered after o returns. o should return quickly, since it delays the
// caller whose call caused the event. If o panics, the panic reaches that
// caller, the Manager's state stays consistent, and later events are
// delivered.
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) { c.observer = o })
}
