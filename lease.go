package worklease

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A Manager grants exclusive, ordered work leases per domain. It holds a
// sharded map of per-domain records; each record has its own mutex, its
// current lease, its backlog and its terminal offsets.
//
// A Manager is safe for concurrent use by any number of goroutines. It starts
// no goroutines, never sleeps, and holds no lock while it calls code outside
// the package. Calls on different domains rarely contend; calls on one domain
// are serialized.
type Manager struct {
	// Immutable after New.
	shards    []shard
	shardMask uint64
	seed      maphash.Seed
	instance  uint64 // random, non-zero; makes this Manager's tokens unique
	policy    policy
	clock     Clock          // nil: the system clock, read through timeline
	timeline  timeline       // reads the system clock when clock is nil
	loc       *time.Location // the clock's time zone, which reported times are in
	observer  Observer
	journal   Journal      // nil: state lives in memory only
	replaying *replayState // non-nil while New replays the journal; only New's goroutine runs
	// timed: leases may expire (WithLeaseTTL, or a lease that replay
	// restored kept its expiry) or an observer is told when transitions
	// happen. Then every call reads the clock. Otherwise only TryAcquire
	// and Fail do, as grants and dead letters keep their time; the records
	// the other calls journal then carry none, as replay needs none to
	// apply them. Set by New, before the Manager is shared.
	timed bool
	// reporting: transitions are reported to an observer or a journal, not
	// only counted.
	reporting bool

	domainSerial atomic.Uint64 // last serial given to a new domain's record
	fenceFloor   atomic.Uint64 // highest fence of any forgotten domain
	closed       atomic.Bool
	// settingsDue: the journal does not state the Manager's setting (see
	// RecordSettings); the first record journaled after New is preceded by
	// one that does, appended under settingsMu.
	settingsDue atomic.Bool
	settingsMu  sync.Mutex
	failure     atomic.Pointer[error] // the journal's failure; set once, then every call returns it
	snapshots   snapshotter
}

// New returns a Manager configured by opts. With no options it behaves
// exactly as the seed 000 contract, with DefaultMaxRetries retries per
// offset. New returns an error wrapping ErrInvalidConfig if an option has an
// invalid value; it never panics.
func New(opts ...Option) (*Manager, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := 1 << bits.Len(uint(cfg.shards-1)) // round up to a power of two
	m := &Manager{
		shards:    make([]shard, n),
		shardMask: uint64(n - 1),
		seed:      maphash.MakeSeed(),
		instance:  newInstanceID(),
		policy: policy{
			maxRetries: cfg.maxRetries,
			ttl:        cfg.ttl,
			lifo:       cfg.ordering == LIFO,
			bestEffort: cfg.bestEffort,
			park:       cfg.park,
			monotonic:  cfg.monotonic,
		},
		clock:     cfg.clock,
		timeline:  newTimeline(),
		loc:       time.Local,
		observer:  cfg.observer,
		journal:   cfg.journal,
		timed:     cfg.ttl > 0 || cfg.observer != nil,
		reporting: cfg.observer != nil || cfg.journal != nil,
	}
	if m.clock != nil {
		m.loc = m.clock.Now().Location()
	}
	if m.journal != nil {
		if err := m.replay(); err != nil {
			if !errors.Is(err, ErrJournalInUse) { // else it is the other Manager's to close
				_ = m.journal.Close() // releases what it holds, such as a directory lock; the replay error says more
			}
			return nil, err
		}
		m.timed = m.timed || m.anyLeaseExpires()
	}
	return m, nil
}

// newInstanceID returns a random non-zero number that tells this Manager's
// tokens from every other Manager's.
func newInstanceID() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:]) // never fails; see crypto/rand.Read
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

func (m *Manager) now() instant {
	if m.clock == nil {
		return m.timeline.now()
	}
	return instantOf(m.clock.Now())
}

// nowIfNeeded reads the clock only if leases may expire or events carry a
// time (see Manager.timed).
func (m *Manager) nowIfNeeded() instant {
	if !m.timed {
		return 0
	}
	return m.now()
}

// Close marks the Manager closed: every later call returns ErrClosed. Calls
// already under way finish normally. With a journal, Close waits for a
// snapshot under way, then closes the journal, which makes everything
// appended durable, and returns its error. Close returns ErrClosed if the
// Manager was already closed.
func (m *Manager) Close() error {
	if m.closed.Swap(true) {
		return ErrClosed
	}
	if m.journal == nil {
		return nil
	}
	m.snapshots.stop()
	return m.journal.Close()
}

// usable returns the error every call returns once the Manager is closed or
// its journal has failed, and nil before.
func (m *Manager) usable() error {
	if f := m.failure.Load(); f != nil {
		return *f
	}
	if m.closed.Load() {
		return ErrClosed
	}
	return nil
}

// durable waits until the journal holds every record up to seq. appendErr is
// an error a call met appending its records; it, or a failed wait, closes
// the Manager for good.
func (m *Manager) durable(seq uint64, appendErr error) error {
	err := appendErr
	if err == nil {
		if err = m.journal.Wait(seq); err == nil {
			m.snapshots.maybeStart(m)
			return nil
		}
	}
	failed := fmt.Errorf("%w: %w", ErrJournalFailed, err)
	m.failure.CompareAndSwap(nil, &failed)
	return *m.failure.Load()
}

// AcquireStatus says what TryAcquire did.
type AcquireStatus uint8

// The outcomes of TryAcquire.
const (
	_ AcquireStatus = iota // the zero value is not a status

	// Acquired: the caller now holds the domain's lease on the offset, under
	// AcquireResult.Token. Work on it, then call Succeed or Fail.
	Acquired
	// AlreadyAcquired: the offset is the one the domain is working on now.
	// AcquireResult.Token is the holder's token, with its AcquiredAt and
	// RetryCount; nothing changed.
	AlreadyAcquired
	// Enqueued: another offset is in flight, so this one waits in the
	// domain's backlog (once, however many times it is enqueued). Acquire it
	// later, when a Succeed or Fail hint names it.
	Enqueued
	// AlreadyProcessed: the offset succeeded before; nothing changed.
	AlreadyProcessed
	// AlreadyFailed: the offset was given up on before; nothing changed.
	AlreadyFailed
)

// String returns the status's name, e.g. "Acquired".
func (s AcquireStatus) String() string {
	switch s {
	case Acquired:
		return "Acquired"
	case AlreadyAcquired:
		return "AlreadyAcquired"
	case Enqueued:
		return "Enqueued"
	case AlreadyProcessed:
		return "AlreadyProcessed"
	case AlreadyFailed:
		return "AlreadyFailed"
	}
	return invalidStatus("AcquireStatus", uint8(s))
}

// AcquireResult is the outcome of TryAcquire.
type AcquireResult struct {
	Status AcquireStatus
	// Token, AcquiredAt, ExpiresAt and RetryCount describe the lease when
	// Status is Acquired or AlreadyAcquired, and are zero otherwise.
	// AcquiredAt is when the offset was first granted; retries and re-grants
	// after an expiry do not change it. It is the clock's reading as the
	// granting call began, taken before the domain's lock so that the clock
	// is never called under it: a grant that waited for the lock may report
	// a time a little before the previous grant's. ExpiresAt is when the
	// lease runs out unless extended (zero: never; see WithLeaseTTL).
	// RetryCount is the number of failed attempts of the offset so far (Fail
	// calls that scheduled a retry, and expiries). Together they let the
	// caller compute its backoff.
	Token      Token
	AcquiredAt time.Time
	ExpiresAt  time.Time
	RetryCount int
}

// SucceedStatus says what Succeed did.
type SucceedStatus uint8

// The outcomes of Succeed. Either way the offset is processed and the domain
// is idle: Succeed hands nothing off.
const (
	_ SucceedStatus = iota // the zero value is not a status

	// NoBacklog: the domain's backlog is empty.
	NoBacklog
	// NextHint: SucceedResult.Next is the head of the backlog, the only
	// offset the domain will grant next. It is still queued: acquire it with
	// TryAcquire.
	NextHint
)

// String returns the status's name, e.g. "NextHint".
func (s SucceedStatus) String() string {
	switch s {
	case NoBacklog:
		return "NoBacklog"
	case NextHint:
		return "NextHint"
	}
	return invalidStatus("SucceedStatus", uint8(s))
}

// SucceedResult is the outcome of Succeed.
type SucceedResult struct {
	Status SucceedStatus
	Next   int64 // the backlog's head when Status is NextHint; zero otherwise
}

// FailStatus says what Fail did.
type FailStatus uint8

// The outcomes of Fail.
const (
	_ FailStatus = iota // the zero value is not a status

	// RetryScheduled: the caller keeps the lease, under the same token, and
	// should try the offset again after a backoff of its choosing.
	// FailResult.RetryCount is the number of retries scheduled so far.
	RetryScheduled
	// GiveUpNoBacklog: the offset ran out of retries and is now failed
	// (terminal); the lease is released and the backlog is empty.
	GiveUpNoBacklog
	// GiveUpNextHint: as GiveUpNoBacklog, but the backlog is not empty:
	// FailResult.Next is its head, still queued.
	GiveUpNextHint
	// GiveUpParked: as GiveUpNoBacklog, but the domain is paused, by Pause
	// or parked by WithParkOnDeadLetter: it grants nothing, its backlog
	// waiting, until Resume.
	GiveUpParked
)

// String returns the status's name, e.g. "RetryScheduled".
func (s FailStatus) String() string {
	switch s {
	case RetryScheduled:
		return "RetryScheduled"
	case GiveUpNoBacklog:
		return "GiveUpNoBacklog"
	case GiveUpNextHint:
		return "GiveUpNextHint"
	case GiveUpParked:
		return "GiveUpParked"
	}
	return invalidStatus("FailStatus", uint8(s))
}

// FailResult is the outcome of Fail.
type FailResult struct {
	Status FailStatus
	// RetryCount is the number of retries scheduled for the offset: after a
	// RetryScheduled it includes this one; after a give-up it is the count
	// the offset reached.
	RetryCount int
	Next       int64 // the backlog's head when Status is GiveUpNextHint; zero otherwise
}

// TryAcquire asks for the lease on offset in domain. It never blocks on
// other leases: if the domain is busy with another offset, or paused, the
// offset is queued and TryAcquire returns Enqueued.
//
// When the domain is idle and its backlog is not empty, only the backlog's
// head may be acquired; any other offset is a caller bug and returns a
// *BacklogOrderError (matching ErrBacklogOrder) without changing anything,
// unless WithBestEffortOrdering allows it. A negative offset returns
// ErrInvalidOffset.
func (m *Manager) TryAcquire(domain string, offset int64) (res AcquireResult, err error) {
	if err := m.usable(); err != nil {
		return AcquireResult{}, err
	}
	if offset < 0 {
		return AcquireResult{}, domainError("TryAcquire", domain, ErrInvalidOffset)
	}
	now := m.now() // read outside the lock: a caller's clock may take locks of its own
	sh, r := m.lockRecord(domain, true)
	e := emitter{m: m, sh: sh, r: r, now: now}
	// res is filled in place: building it elsewhere and copying it costs
	// a tenth of a cycle.
	res.Status, err = r.state.acquire(&m.policy, &e, offset)
	if res.Status == Acquired || res.Status == AlreadyAcquired {
		r.state.lease.describe(&res, m.loc)
	}
	if ferr := m.finish(sh, r, &e); ferr != nil {
		return AcquireResult{}, ferr
	}
	return res, err
}

// Succeed records that the lease under tok finished its offset: the offset
// becomes processed (terminal) and the lease is released. Succeed does not
// hand off: if the backlog is not empty it returns NextHint with the head,
// which the caller acquires with TryAcquire (while the domain is paused,
// that answers Enqueued until Resume).
//
// Succeed returns an error wrapping ErrNoLease if the domain holds no lease,
// ErrTokenMismatch if tok is not the current lease's token, ErrLeaseExpired
// if tok's lease ran out of time, or ErrLeaseRevoked if an operator took it
// back; in every case nothing changes.
func (m *Manager) Succeed(domain string, tok Token) (SucceedResult, error) {
	if err := m.usable(); err != nil {
		return SucceedResult{}, err
	}
	now := m.nowIfNeeded()
	sh, r := m.lockRecord(domain, false)
	if r == nil {
		return SucceedResult{}, domainError("Succeed", domain, ErrNoLease)
	}
	e := emitter{m: m, sh: sh, r: r, now: now}
	res, err := r.state.succeed(&m.policy, &e, tok)
	if ferr := m.finish(sh, r, &e); ferr != nil {
		return SucceedResult{}, ferr
	}
	if err != nil {
		return SucceedResult{}, domainError("Succeed", domain, err)
	}
	return res, nil
}

// Fail records that an attempt under tok failed. cause is the attempt's
// error; it may be nil. While the offset has retries left, Fail keeps the
// lease and returns RetryScheduled: the caller backs off and tries again
// under the same token. Once it has none, the offset becomes failed
// (terminal) and a dead letter that keeps cause, the lease is released, and
// Fail returns GiveUpNoBacklog or GiveUpNextHint (or GiveUpParked). With
// WithLeaseTTL, a retry also gives the lease at least a full TTL from now;
// without it leases never expire (except one restored from a journal
// written with a TTL, which keeps its expiry).
//
// Fail returns the same errors as Succeed, and then changes nothing.
func (m *Manager) Fail(domain string, tok Token, cause error) (FailResult, error) {
	if err := m.usable(); err != nil {
		return FailResult{}, err
	}
	now := m.now() // a give-up records when
	if m.journal != nil && cause != nil {
		// The journal keeps the cause's text; take it now, outside the lock.
		cause = &causeText{err: cause, text: cause.Error()}
	}
	sh, r := m.lockRecord(domain, false)
	if r == nil {
		return FailResult{}, domainError("Fail", domain, ErrNoLease)
	}
	e := emitter{m: m, sh: sh, r: r, now: now}
	res, err := r.state.fail(&m.policy, &e, tok, cause)
	if ferr := m.finish(sh, r, &e); ferr != nil {
		return FailResult{}, ferr
	}
	if err != nil {
		return FailResult{}, domainError("Fail", domain, err)
	}
	return res, nil
}

// Extend renews the lease under tok so that it expires no sooner than d from
// now, and returns its expiry. It never shortens a lease. Without
// WithLeaseTTL leases never expire (except one restored from a journal
// written with a TTL, which keeps its expiry), and Extend only checks tok
// and returns the zero time.
//
// Extend returns an error wrapping ErrInvalidDuration if d is not positive,
// and otherwise the same errors as Succeed (ErrNoLease after the lease was
// released, ErrLeaseExpired once it has run out); either way nothing
// changes.
func (m *Manager) Extend(domain string, tok Token, d time.Duration) (time.Time, error) {
	if err := m.usable(); err != nil {
		return time.Time{}, err
	}
	if d <= 0 {
		return time.Time{}, domainError("Extend", domain, ErrInvalidDuration)
	}
	now := m.nowIfNeeded()
	sh, r := m.lockRecord(domain, false)
	if r == nil {
		return time.Time{}, domainError("Extend", domain, ErrNoLease)
	}
	e := emitter{m: m, sh: sh, r: r, now: now}
	at, err := r.state.extend(&m.policy, &e, tok, d)
	if ferr := m.finish(sh, r, &e); ferr != nil {
		return time.Time{}, ferr
	}
	if err != nil {
		return time.Time{}, domainError("Extend", domain, err)
	}
	return at.in(m.loc), nil
}

// invalidStatus names a status value that is not one of its type's constants.
func invalidStatus(typ string, v uint8) string {
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}
