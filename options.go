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

// An Option configures a Manager, or another backend that reads it with
// NewConfig. Options are applied in order by New, which validates the
// result.
type Option interface {
	configure(*Config)
}

type optionFunc func(*Config)

func (f optionFunc) configure(c *Config) { f(c) }

// DefaultMaxRetries is the number of retries a Manager allows per offset
// unless WithMaxRetries says otherwise.
const DefaultMaxRetries = 3

// DefaultShards is the number of shards the domain map is split into unless
// WithShards says otherwise.
const DefaultShards = 64

// maxShards bounds WithShards; more shards than this only waste memory.
const maxShards = 1 << 16

// Config is the settings a list of Options makes, in a form any backend can
// read: a backend other than the Manager takes the same Options and reads
// them with NewConfig, so that one option means one thing everywhere. A
// backend that does not offer a setting says so in its documentation and
// refuses it in its constructor.
type Config struct {
	MaxRetries         int           // WithMaxRetries; DefaultMaxRetries unless set
	LeaseTTL           time.Duration // WithLeaseTTL; zero: leases never expire
	Ordering           Ordering      // WithOrdering; FIFO unless set
	BestEffortOrdering bool          // WithBestEffortOrdering
	ParkOnDeadLetter   bool          // WithParkOnDeadLetter
	MonotonicOffsets   bool          // WithMonotonicOffsets
	Clock              Clock         // WithClock; nil: the system clock
	Observer           Observer      // WithObserver; nil: none
	MaxPayload         int           // WithMaxPayload; DefaultMaxPayload unless set
	KeyWindow          time.Duration // WithKeyWindow; DefaultKeyWindow unless set

	// The in-memory Manager's own settings.
	Shards  int     // WithShards; DefaultShards unless set
	Journal Journal // WithJournal; nil: state lives in memory only
}

// NewConfig applies opts in order to the defaults and returns the result,
// or an error wrapping ErrInvalidConfig if a setting is out of range (New
// returns the same error for the same options). Nil options are skipped.
func NewConfig(opts ...Option) (Config, error) {
	c := Config{MaxRetries: DefaultMaxRetries, Shards: DefaultShards, Ordering: FIFO, MaxPayload: DefaultMaxPayload, KeyWindow: DefaultKeyWindow}
	for _, o := range opts {
		if o != nil {
			o.configure(&c)
		}
	}
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (c *Config) validate() error {
	if c.MaxRetries < 0 {
		return fmt.Errorf("%w: WithMaxRetries(%d): must be zero or more", ErrInvalidConfig, c.MaxRetries)
	}
	if c.Shards < 1 || c.Shards > maxShards {
		return fmt.Errorf("%w: WithShards(%d): must be between 1 and %d", ErrInvalidConfig, c.Shards, maxShards)
	}
	if c.LeaseTTL < 0 {
		return fmt.Errorf("%w: WithLeaseTTL(%v): must be zero (never expire) or positive", ErrInvalidConfig, c.LeaseTTL)
	}
	if c.Ordering != FIFO && c.Ordering != LIFO {
		return fmt.Errorf("%w: WithOrdering(%v): must be FIFO or LIFO", ErrInvalidConfig, c.Ordering)
	}
	if c.MaxPayload < 0 || c.MaxPayload > MaxPayloadLimit {
		return fmt.Errorf("%w: WithMaxPayload(%d): must be between 0 and %d", ErrInvalidConfig, c.MaxPayload, MaxPayloadLimit)
	}
	if c.KeyWindow <= 0 {
		return fmt.Errorf("%w: WithKeyWindow(%v): must be positive", ErrInvalidConfig, c.KeyWindow)
	}
	return nil
}

// WithMaxPayload sets the longest payload, in bytes, that Enqueue,
// EnqueueAt and Append accept: a longer one is refused with an error
// matching ErrPayloadTooLarge, and nothing is stored. The default is
// DefaultMaxPayload (1 MiB); n may be 0 (no payloads but empty ones) to
// MaxPayloadLimit (16 MiB), and New returns an error for any other. With
// WithJournal, the limit is also at most what the journal's largest
// record leaves room for, if it says how large that is (a wal.Log with
// its default wal.WithMaxRecordSize takes a payload of DefaultMaxPayload;
// give it a larger limit for a larger payload).
func WithMaxPayload(n int) Option {
	return optionFunc(func(c *Config) { c.MaxPayload = n })
}

// DefaultKeyWindow is how long an idempotency key is kept unless
// WithKeyWindow says otherwise.
const DefaultKeyWindow = 24 * time.Hour

// WithKeyWindow sets how long Append keeps an idempotency key after the
// call that stored it: an Append with the same key on the same domain
// within d returns the first call's offset and stores nothing; after d the
// key is forgotten, and such a call is a new Append. The window is read
// against the Manager's clock, and a journal keeps keys across restarts.
// The default is DefaultKeyWindow (24 hours); d must be positive.
func WithKeyWindow(d time.Duration) Option {
	return optionFunc(func(c *Config) { c.KeyWindow = d })
}

// WithMaxRetries sets how many times Fail may schedule a retry of one offset
// before the next Fail gives up on it: with n retries an offset gets n+1
// attempts, and the (n+1)th Fail moves it to the failed set. Zero makes the
// first Fail final. The default is DefaultMaxRetries; a negative n makes New
// return an error.
func WithMaxRetries(n int) Option {
	return optionFunc(func(c *Config) { c.MaxRetries = n })
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
	return optionFunc(func(cfg *Config) { cfg.Clock = c })
}

// WithShards sets how many shards the Manager splits its map of domains into;
// each shard has its own lock, so more shards mean less contention when many
// goroutines look up many domains. n is rounded up to a power of two. It must
// be between 1 and 65536; the default is DefaultShards.
func WithShards(n int) Option {
	return optionFunc(func(c *Config) { c.Shards = n })
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
// Zero, the default, means leases never expire. A negative d
// makes New return an error.
//
// A lease's expiry belongs to the lease, whatever the options of the
// Manager that later replays a journal holding it. A lease restored with an
// expiry into a Manager without WithLeaseTTL keeps it, and every call
// honours it: it expires when its domain is touched, Extend renews it and
// returns its expiry, Reap revokes it once due, Leases and Inspect report
// it, and a retry keeps it (there is no TTL to add); once it ends, the
// offset's next grant never expires. A lease restored without an expiry
// into a Manager with WithLeaseTTL gets one d after New (except on a
// domain no call accepts, see MaxDomainLen, which keeps none), which New
// journals as an extension (told to no observer, counted in no Stats), so
// that a holder that died with the old process is reaped and every later
// replay restores the same expiry. If the journal refuses that record (a
// read-only one does), New returns an error wrapping ErrJournalFailed.
func WithLeaseTTL(d time.Duration) Option {
	return optionFunc(func(c *Config) { c.LeaseTTL = d })
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
	return statusName(nil, "Ordering", uint8(o))
}

// WithOrdering sets the order in which each domain's backlog is granted:
// FIFO (the default) or LIFO. Either way, offsets whose lease expired, that
// were force-released or that were redriven go to the front, next in line.
// Any other value makes New return an error.
func WithOrdering(o Ordering) Option {
	return optionFunc(func(c *Config) { c.Ordering = o })
}

// WithBestEffortOrdering relaxes ordering: an idle domain grants any offset
// asked for, taking it out of the backlog if it is queued there, instead of
// returning a *BacklogOrderError for anything but the backlog's head. Each
// such grant is reported as an EventOutOfOrder and counted in
// Stats.OutOfOrder. The default is strict ordering.
func WithBestEffortOrdering() Option {
	return optionFunc(func(c *Config) { c.BestEffortOrdering = true })
}

// WithParkOnDeadLetter parks a domain when one of its offsets is
// dead-lettered: the domain keeps its backlog but grants nothing (as under
// Pause, a TryAcquire that would grant answers Enqueued; terminal offsets
// still answer AlreadyProcessed or AlreadyFailed) until an operator calls
// Resume, so that later
// offsets do not run past a failure someone must look at. Fail then returns
// GiveUpParked. By default a domain gives up on the offset and moves on.
func WithParkOnDeadLetter() Option {
	return optionFunc(func(c *Config) { c.ParkOnDeadLetter = true })
}

// WithMonotonicOffsets tells the Manager that each domain's offsets only
// grow, so that it can remember processed offsets the way Kafka remembers a
// committed offset: as a watermark. It is for callers whose domains each see
// an increasing but sparse subsequence of offsets. A Kafka partition split by
// key is one: the key "user-1" may see offsets 3, 17, 42 and 108 of its
// partition, the other keys' records in between. Kept exactly, such offsets
// cost memory one by one, since a hole follows each; and after a consumer
// restart, which replays the partition from its last commit, offsets a
// domain never saw would be granted as new work.
//
// With the option, each domain keeps its highest terminal offset, hw: the
// largest offset that succeeded or failed (given up on by Fail, expired on
// its last attempt, or killed). An offset counts as processed if and only if
// it is at or below hw and is not failed, not queued in the backlog and not
// the offset in flight. So TryAcquire answers AlreadyProcessed for a replayed
// offset, and for an offset at or below hw the domain never saw. A failed
// offset still answers AlreadyFailed; Redrive queues it again, and it counts
// as processed only once it succeeds. An offset queued below hw (LIFO or
// best-effort ordering, an expiry or a redrive can put one there) stays
// queued and is granted as usual. Kill returns ErrAlreadyProcessed for any
// offset that counts as processed. Killing an offset above hw raises hw to
// it, so Kill allows it only for an offset queued or in flight: for any
// other, which the domain has not seen, Kill returns ErrOffsetAhead and
// changes nothing, as failing it would make every offset below it count as
// processed (an operator's typo would silently drop that work). Inspect
// reports as DomainInfo.Processed the number of offsets that count as
// processed: hw+1 less the failed, queued and leased offsets at or below
// hw. Forget drops a domain's hw with the rest of its history.
//
// Memory: a domain's processed offsets are one run, [0, hw], whatever the
// holes between them, so a domain costs the same after a million sparse
// offsets as after one; failed and queued offsets are kept one by one, as
// without the option.
//
// The default is the exact rule: an offset counts as processed only if
// it succeeded, and an offset never seen is never reported processed.
//
// With WithJournal, the journal records which rule it was written under
// (a RecordSettings record, written with the first record after New unless
// the journal says so already, and the snapshot), and replay reads each
// part of it under the rule it was written with, so a Manager restarts to
// the state it had. The option can then be switched for an existing
// journal at any restart (the switch reaches the journal with the
// Manager's first record or snapshot: until then, a restart reads the
// journal as before). New converts the replayed state to its own rule:
//
//   - On: each domain's hw becomes the largest processed or failed offset
//     it holds, so every offset up to it that is not failed, queued or in
//     flight counts as processed from then on, those never seen included.
//   - Off: every offset that counted as processed stays processed, and no
//     other: the run [0, hw] less the failed, queued and leased offsets
//     below hw. Inspect reports the same counts as before the switch, and
//     the domain's processed offsets cost memory one run per hole again.
//
// A journal written by a version of this package from before journals
// recorded the rule holds no RecordSettings record and a version 1
// snapshot: replay reads that part of it under the rule of the Manager
// opening it, as those versions did, so open it with the option it was
// written with. The Manager then records its rule with its first record,
// and once a new snapshot replaces the old one (Snapshot, or the next one
// the journal asks for), the journal says how all of it reads. With the
// other rule, such a journal may fail to replay with ErrReplay: without the
// option, a snapshot whose run [0, hw] holds a failed, queued or leased
// offset; with it, records whose offsets did not grow.
func WithMonotonicOffsets() Option {
	return optionFunc(func(c *Config) { c.MonotonicOffsets = true })
}

// WithObserver makes the Manager tell o about every transition of every
// domain (see EventKind). Events are delivered after the domain's lock is
// released, in the order they happened for each domain, by the goroutine
// whose call caused them or by one still delivering that domain's earlier
// events; events of different domains may be delivered concurrently, so o
// must be safe for concurrent use. Succeed, Fail and Extend on a domain
// the Manager does not know (never seen, or forgotten) return ErrNoLease
// and are no event: with no domain to order it among, an event could reach
// o before the forgotten domain's last events, or inside o's own call.
//
// o may call the Manager, even on the same domain: its call's events are
// delivered after o returns. o should return quickly, since it delays the
// caller whose call caused the event. If o panics, the panic reaches that
// caller, the Manager's state stays consistent, and later events are
// delivered.
func WithObserver(o Observer) Option {
	return optionFunc(func(c *Config) { c.Observer = o })
}
