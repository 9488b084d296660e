package worklease

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// A Manager grants exclusive, ordered work leases per domain. It holds a
// sharded map of per-domain records; each record has its own mutex, its
// current lease, its backlog and its terminal offsets.
//
// A Manager is safe for concurrent use by any number of goroutines. Without
// a journal it starts no goroutines; with one, it writes snapshots in a
// goroutine of its own, which Close waits for. It never sleeps (but in
// WaitClaim, which waits for work when asked to), and holds no
// lock while it calls code outside the package (a Clock, an Observer, a
// cause's Error method), except the Journal's AppendRecord, which runs under
// the domain's lock by design and must not block. Calls on different
// domains rarely contend; calls on one domain are serialized.
//
// Use New: the zero Manager is not usable. A zero Manager, and a nil
// *Manager, never panic: every call returns an error matching ErrClosed,
// Close included, and Stats reports zero counts.
type Manager struct {
	// Immutable after New.
	shards    []shard
	shardMask uint64
	seed      domainHash
	policy    policy         // its instance, random and non-zero, makes this Manager's tokens unique
	clock     Clock          // nil: the system clock, read through timeline
	timeline  timeline       // reads the system clock when clock is nil
	loc       *time.Location // the clock's time zone, which reported times are in
	observer  Observer
	journal   Journal        // nil: state lives in memory only
	payloads  PayloadJournal // the journal, if it gives payloads back; nil otherwise
	// maxPayload is the longest payload the producers' calls take.
	maxPayload int
	replaying  *replayState // non-nil while New replays the journal; only New's goroutine runs
	// timed: leases may expire (WithLeaseTTL, or a lease that replay
	// restored kept its expiry) or an observer is told when transitions
	// happen. Then every call reads the clock. Otherwise only TryAcquire
	// and Fail do, as grants and dead letters keep their time; the records
	// the other calls journal then carry none, as replay needs none to
	// apply them. Set by New, before the Manager is shared.
	timed bool
	// expiring: leases may have an expiry (WithLeaseTTL, or replay
	// restored one), so the shards' expiry indexes are kept. Without it
	// they stay empty and cost nothing. Set by New, before the Manager is
	// shared.
	expiring bool
	// reporting: transitions are reported to an observer or a journal, not
	// only counted.
	reporting bool
	// plain: neither reporting nor expiring, so that a call's step ends
	// with the count of its changes and the unlock (see finish).
	plain bool

	domainSerial atomic.Uint64 // last serial given to a new domain's record
	fenceFloor   atomic.Uint64 // highest fence of any forgotten domain
	// open is set by New and cleared by Close or a journal failure, so that
	// a call checks one flag; closed and failure say which.
	open   atomic.Bool
	closed atomic.Bool
	// settingsDue: the journal does not state the Manager's setting (see
	// RecordSettings); the first record journaled after New is preceded by
	// one that does, appended under settingsMu.
	settingsDue atomic.Bool
	settingsMu  sync.Mutex
	failure     atomic.Pointer[error] // the journal's failure; set once, then every call returns it
	snapshots   snapshotter

	// ready is the queue of the domains Claim may lease, which the first
	// pull call makes (see pullQueue): nil until then, and every call
	// keeps it up to date from then on (see finish). pullMu serializes
	// making it and closing it; pullClosed, which it guards, says that
	// Close ran, so that a queue made afterwards starts closed.
	ready      atomic.Pointer[readyQueue]
	pullMu     sync.Mutex
	pullClosed bool
}

// New returns a Manager configured by opts. With no options it keeps the
// contract and nothing more (see the package documentation): leases never
// expire, backlogs are first in, first out, and an offset gets
// DefaultMaxRetries retries. New returns an error wrapping ErrInvalidConfig if an option has an
// invalid value; it never panics.
func New(opts ...Option) (*Manager, error) {
	cfg, err := NewConfig(opts...)
	if err != nil {
		return nil, err
	}
	maxPayload := cfg.MaxPayload
	if j, ok := cfg.Journal.(recordSizer); ok {
		maxPayload = min(maxPayload, max(0, payloadRoom(j.MaxRecordSize())))
	}
	n := 1 << bits.Len(uint(cfg.Shards-1)) // round up to a power of two
	m := &Manager{
		shards:    make([]shard, n),
		shardMask: uint64(n - 1),
		seed:      newDomainHash(),
		policy: policy{
			maxRetries: cfg.MaxRetries,
			ttl:        cfg.LeaseTTL,
			lifo:       cfg.Ordering == LIFO,
			bestEffort: cfg.BestEffortOrdering,
			park:       cfg.ParkOnDeadLetter,
			monotonic:  cfg.MonotonicOffsets,
			keyWindow:  cfg.KeyWindow,
			instance:   newInstanceID(),
		},
		maxPayload: maxPayload,
		clock:      cfg.Clock,
		timeline:   newTimeline(),
		loc:        time.Local,
		observer:   cfg.Observer,
		journal:    cfg.Journal,
		timed:      cfg.LeaseTTL > 0 || cfg.Observer != nil,
		expiring:   cfg.LeaseTTL > 0,
		reporting:  cfg.Observer != nil || cfg.Journal != nil,
	}
	m.plain = !m.reporting && !m.expiring
	m.payloads, _ = cfg.Journal.(PayloadJournal)
	if m.clock != nil {
		m.loc = m.clock.Now().Location()
	}
	m.open.Store(true)
	if m.journal != nil {
		err := m.replay()
		if err == nil {
			err = m.timeRestoredLeases()
		}
		if err != nil {
			if !errors.Is(err, ErrJournalInUse) { // else it is the other Manager's to close
				_ = m.journal.Close() // releases what it holds, such as a directory lock; the replay error says more
			}
			return nil, err
		}
		expires := m.anyLeaseExpires()
		m.timed = m.timed || expires
		m.expiring = m.expiring || expires
		m.plain = !m.reporting && !m.expiring
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

// now reads the Manager's clock: the caller's, or the system clock through
// the timeline.
func (m *Manager) now() instant {
	if m.clock == nil {
		// The timeline's reading (see timeline), made here rather than in
		// a method of its own: a grant reads the time in one call less.
		return m.timeline.epoch.add(time.Since(m.timeline.start))
	}
	return instantOf(m.clock.Now())
}

// nowIfNeeded reads the clock only if leases may expire, events carry a
// time (see Manager.timed) or the Manager keeps a ready queue, which
// orders domains by when they became ready.
func (m *Manager) nowIfNeeded() instant {
	if !m.timed && m.ready.Load() == nil {
		return 0
	}
	return m.now()
}

// Close marks the Manager closed: every later call returns ErrClosed. Calls
// already under way finish normally, and WaitClaim calls that wait return
// ErrClosed. With a journal, Close waits for a
// snapshot under way, then closes the journal, which makes everything
// appended durable, and returns its error. Close returns ErrClosed if the
// Manager was already closed, and an error matching ErrClosed for a zero or
// nil Manager.
func (m *Manager) Close() error {
	if m == nil || m.shards == nil {
		return errNotNew
	}
	if m.closed.Swap(true) {
		return ErrClosed
	}
	m.open.Store(false)
	m.stopPulling()
	if m.journal == nil {
		return nil
	}
	m.snapshots.stop()
	return m.journal.Close()
}

// TryAcquire asks for the lease on offset in domain. It never blocks on
// other leases: if the domain is busy with another offset, or paused, the
// offset is queued and TryAcquire returns Enqueued.
//
// When the domain is idle and its backlog is not empty, only the backlog's
// head may be acquired; any other offset is a caller bug and returns a
// *BacklogOrderError (matching ErrBacklogOrder) without changing anything,
// unless WithBestEffortOrdering allows it. An empty domain, or one longer
// than MaxDomainLen, returns ErrInvalidDomain, and a negative offset
// ErrInvalidOffset.
func (m *Manager) TryAcquire(domain string, offset int64) (res AcquireResult, err error) {
	sh, r, now, err := m.enter(&callTryAcquire, domain, offset)
	if r == nil {
		return AcquireResult{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	// res is filled in place: building it elsewhere and copying it costs
	// a tenth of a cycle.
	res.Status, err = r.state.acquire(&m.policy, &st, offset)
	if res.Status == Acquired || res.Status == AlreadyAcquired {
		r.state.lease.describe(&res, r.state.leaseToken(&m.policy), m.loc)
	}
	if ferr := m.finish(sh, r, &st, nil); ferr != nil {
		return AcquireResult{}, ferr
	}
	if err != nil { // out of turn: the state machine does not know the domain
		err.(*BacklogOrderError).Domain = domain
	}
	return res, err
}

// Succeed records that the lease under tok finished its offset: the offset
// becomes processed (terminal) and the lease is released. Succeed does not
// hand off: if the backlog is not empty it returns NextHint with the head,
// which the caller acquires with TryAcquire (while the domain is paused,
// that answers Enqueued until Resume). Until then the domain is idle with a
// backlog, and TryAcquire of any other offset returns ErrBacklogOrder;
// SucceedNext leaves no such gap.
//
// Succeed returns an error wrapping ErrNoLease if the domain holds no lease,
// ErrTokenMismatch if tok is not the current lease's token, ErrLeaseExpired
// if tok's lease ran out of time, or ErrLeaseRevoked if an operator took it
// back; in every case nothing changes but the revocation of an expired
// lease (step 3 below). Succeed, Fail and Extend check in
// this order, and the first check that applies decides:
//
//  1. the Manager is closed (ErrClosed) or its journal failed
//     (ErrJournalFailed); then the domain is empty or longer than
//     MaxDomainLen (ErrInvalidDomain); then, for Extend, the duration is
//     not positive (ErrInvalidDuration);
//  2. the domain is unknown (ErrNoLease);
//  3. the domain's lease has expired: it is revoked now, and tok is
//     checked against what remains;
//  4. tok is the current lease's token: the call goes ahead;
//  5. tok is the domain's latest revoked token (ErrLeaseExpired or
//     ErrLeaseRevoked), whether the domain is idle or leased again: a
//     domain remembers only that one, so an older revoked token goes on
//     to the next checks, as any stale token does;
//  6. the domain holds no lease (ErrNoLease);
//  7. otherwise (ErrTokenMismatch).
func (m *Manager) Succeed(domain string, tok Token) (SucceedResult, error) {
	return m.succeed(&callSucceed, domain, tok, false)
}

// SucceedNext is Succeed, and then, in the same step under the domain's
// lock, the lease of the backlog's head to the caller: it returns
// NextAcquired, with SucceedResult.Lease describing the new lease, exactly
// as TryAcquire of the head would have granted it (a new token with a
// higher fence, carried attempts, a TTL from now). The domain is never idle
// with a backlog in between, so an offset offered meanwhile by TryAcquire is
// simply Enqueued. A worker that drives a domain with SucceedNext and
// FailNext works through its backlog in order without ever calling
// TryAcquire for a queued offset.
//
// SucceedNext returns NoBacklog when the backlog is empty, and NextHint, as
// Succeed does, when the domain is paused or the backlog's head is
// scheduled for later (EnqueueAt): then nothing is granted. It
// returns the same errors as Succeed, checked in the same order, and then
// changes nothing but the revocation of an expired lease. With a journal it
// writes the records of a Succeed followed by those of a grant.
func (m *Manager) SucceedNext(domain string, tok Token) (SucceedResult, error) {
	return m.succeed(&callSucceedNext, domain, tok, true)
}

// succeed is Succeed, and SucceedNext if next is set; c is the call.
func (m *Manager) succeed(c *callSpec, domain string, tok Token, next bool) (res SucceedResult, err error) {
	sh, r, now, err := m.enter(c, domain, 0)
	if r == nil {
		return SucceedResult{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	// res is filled in place, as in TryAcquire.
	if next {
		err = r.state.succeedNext(&m.policy, &st, tok, &res)
		if res.Status == NextAcquired {
			r.state.lease.fill(&res.Lease, domain, r.state.leaseToken(&m.policy), m.loc)
		}
	} else {
		err = r.state.succeed(&m.policy, &st, tok, &res)
	}
	if ferr := m.finish(sh, r, &st, nil); ferr != nil {
		return SucceedResult{}, ferr
	}
	return res, c.wrap(domain, err)
}

// Fail records that an attempt under tok failed. cause is the attempt's
// error; it may be nil. While the offset has retries left, Fail keeps the
// lease and returns RetryScheduled: the caller backs off and tries again
// under the same token. Once it has none, the offset becomes failed
// (terminal) and a dead letter that keeps cause, the lease is released, and
// Fail returns GiveUpNoBacklog or GiveUpNextHint (or GiveUpParked). With
// WithLeaseTTL, a retry also gives the lease at least a full TTL from now;
// without it a retry keeps the lease's expiry: leases never expire, except
// one restored from a journal written with a TTL, which keeps its expiry
// (see WithLeaseTTL).
//
// Fail calls cause's Error method once, before it takes the domain's lock.
// A cause whose text is longer than MaxCauseLen is kept with its text cut
// to MaxCauseLen (it still unwraps to cause), and one whose text is empty
// leaves the dead letter no cause (see DeadLetter).
//
// Fail returns the same errors as Succeed, and then changes nothing.
func (m *Manager) Fail(domain string, tok Token, cause error) (FailResult, error) {
	return m.fail(&callFail, domain, tok, cause, false)
}

// FailNext is Fail; when the offset is given up on, the backlog's head is
// leased to the caller in the same step, as SucceedNext does after a
// success: FailNext returns GiveUpNextAcquired, with FailResult.Lease
// describing the new lease and FailResult.RetryCount the count the failed
// offset reached. Otherwise it returns what Fail does: RetryScheduled (the
// caller keeps the lease), GiveUpNoBacklog, or GiveUpParked (the domain is
// paused, or WithParkOnDeadLetter just parked it, and nothing is granted),
// or GiveUpNextHint when the backlog's head is scheduled for later
// (EnqueueAt), which nothing may lease before its time.
//
// FailNext returns the same errors as Fail, checked in the same order, and
// then changes nothing but the revocation of an expired lease. With a
// journal it writes the records of a Fail followed by those of a grant.
func (m *Manager) FailNext(domain string, tok Token, cause error) (FailResult, error) {
	return m.fail(&callFailNext, domain, tok, cause, true)
}

// fail is Fail, and FailNext if next is set; c is the call.
func (m *Manager) fail(c *callSpec, domain string, tok Token, cause error, next bool) (res FailResult, err error) {
	// A give-up and a grant record when.
	sh, r, now, err := m.enterWith(c, domain, 0, false, &cause)
	if r == nil {
		return FailResult{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	if next {
		err = r.state.failNext(&m.policy, &st, tok, cause, &res)
		if res.Status == GiveUpNextAcquired {
			r.state.lease.fill(&res.Lease, domain, r.state.leaseToken(&m.policy), m.loc)
		}
	} else {
		err = r.state.fail(&m.policy, &st, tok, cause, &res)
	}
	if ferr := m.finish(sh, r, &st, nil); ferr != nil {
		return FailResult{}, ferr
	}
	return res, c.wrap(domain, err)
}

// Extend renews the lease under tok so that it expires no sooner than d from
// now, and returns its expiry. It never shortens a lease. A lease that
// never expires (every lease without WithLeaseTTL, except one restored from
// a journal written with a TTL, which keeps its expiry and which Extend
// renews; see WithLeaseTTL) stays so: Extend only checks tok and returns
// the zero time.
//
// Extend returns an error wrapping ErrInvalidDuration if d is not positive,
// and otherwise the same errors as Succeed (ErrNoLease after the lease was
// released, ErrLeaseExpired once it has run out); either way nothing
// changes.
func (m *Manager) Extend(domain string, tok Token, d time.Duration) (time.Time, error) {
	var b batch
	at, err := m.extendIn(&b, &callExtend, domain, tok, d)
	if berr := m.endBatch(&b); berr != nil {
		return time.Time{}, berr
	}
	return at, err
}

// extendIn is Extend, in b, for c.
func (m *Manager) extendIn(b *batch, c *callSpec, domain string, tok Token, d time.Duration) (time.Time, error) {
	sh, r, now, err := m.enterWith(c, domain, 0, d <= 0, nil)
	if r == nil {
		return time.Time{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	at, err := r.state.extend(&m.policy, &st, tok, d)
	m.finish(sh, r, &st, b)
	return at.in(m.loc), c.wrap(domain, err) // at is zero, the zero Time, when err is not nil
}
