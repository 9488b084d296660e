package worklease

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// A Journal makes a Manager's transitions durable, so that a Manager built on
// it after a crash has everything the one before acknowledged. The wal
// package implements it; tests may implement it in memory.
//
// Every record a Manager appends has a Domain of at most MaxDomainLen bytes
// and a Cause of at most MaxCauseLen, so a Journal must take records of
// that size (the wal package's smallest limit does). A journal written
// before domains were bounded may replay records of longer domains (or of
// the empty one): the Manager keeps them, but no call accepts them, so it
// writes no record of them again.
//
// The Manager calls AppendRecord with the domain's lock held, once for every
// transition, in the order the domain's transitions happen, and Wait after
// releasing the lock; a call returns only when Wait says its records, and
// every record its answer depends on, are durable. The Manager never retries
// a failed AppendRecord or Wait: it fails closed (see ErrJournalFailed).
type Journal interface {
	// AppendRecord adds rec to the journal and returns its sequence number,
	// which is larger than every number returned before. It should not wait
	// for I/O (buffering is the point) and must not call the Manager.
	AppendRecord(rec Record) (seq uint64, err error)
	// Wait returns once every record up to seq is durable. Wait(0) returns
	// at once.
	Wait(seq uint64) error
	// ReplayRecords calls restore with the latest snapshot, if there is
	// one, then apply with every record after it, in sequence order. New
	// calls it once, before the Manager is used. The snapshot's bytes are
	// valid only until restore returns. A journal serves one Manager: if
	// ReplayRecords was called before, it should return an error wrapping
	// ErrJournalInUse and call nothing, so that a second New on the
	// journal fails rather than let two Managers write to it.
	ReplayRecords(restore func(snapshot []byte) error, apply func(seq uint64, rec Record) error) error
	// SnapshotState replaces the journal's snapshot with the one write
	// produces, which reflects every record appended before SnapshotState
	// was called (and maybe some after), and may then drop the records it
	// covers. Before the new snapshot takes effect, every record appended
	// until write returned must be durable: the snapshot may reflect them.
	SnapshotState(write func(w io.Writer) error) error
	// SnapshotDue reports that the journal has grown enough since its last
	// snapshot that the Manager should write one. It must be cheap.
	SnapshotDue() bool
	// Close makes everything appended durable and releases the journal.
	Close() error
}

// A PayloadJournal is a Journal that gives back the payloads its records
// hold, so that a Manager keeps the bytes of a queued offset's payload
// there, not in memory: a deep backlog then costs memory for its offsets,
// not for their payloads. The wal package's Log is one. A Manager on a
// Journal that is not one keeps every payload in memory too, and writes
// them into its snapshots.
type PayloadJournal interface {
	Journal
	// ReadPayload returns the Payload of the record seq, which AppendRecord
	// took or ReplayRecords gave back with a Payload that is not nil: a
	// copy, the caller's to keep. It may wait for I/O, and for the record
	// to be written; the Manager calls it holding no lock, while it
	// refers to the record (see SnapshotStateKeeping).
	ReadPayload(seq uint64) ([]byte, error)
	// SnapshotStateKeeping is SnapshotState for a Manager whose snapshot
	// refers to records for their payloads: write calls keep with the
	// sequence number of each record it refers to, and the journal then
	// keeps those records, readable by ReadPayload now and after a
	// restart, while it drops the others the snapshot covers. It need not
	// give them back to ReplayRecords again.
	SnapshotStateKeeping(write func(w io.Writer, keep func(seq uint64)) error) error
}

// A recordSizer is a Journal that says how large a record it takes: the
// Manager takes no payload whose record would not fit (see WithMaxPayload).
type recordSizer interface {
	MaxRecordSize() int
}

// payloadRoom returns the longest payload whose record fits in a journal
// that takes records of up to maxRecord bytes: a record with a payload has
// no cause, and besides the payload, its domain (at most MaxDomainLen
// bytes) and its key (MaxKeyLen), takes at most the 2 bytes of the version
// and kind, the 8 of the token's instance and 19 varints (see
// AppendBinary).
func payloadRoom(maxRecord int) int {
	const fixed = 2 + 8 + 19*binary.MaxVarintLen64
	return maxRecord - fixed - MaxDomainLen - MaxKeyLen
}

// WithJournal makes the Manager journal every transition to j. New first
// rebuilds the Manager's state by replaying j, and Close closes j. If New
// fails replaying j, it closes j itself, unless j is in use by another
// Manager (ErrJournalInUse), which keeps it; if New refuses an option
// (ErrInvalidConfig), it leaves j untouched, open, for the caller to close
// or to pass to New again. With a
// journal, a call returns only once the records it wrote, and those of the
// domain before them, are durable, as j's Wait defines it; many concurrent
// calls share the journal's flushes. Times read back from a journal (lease
// and dead-letter times) are the same instants, in UTC; a Manager that replays
// them reports them in its own clock's time zone. The journal keeps every
// payload with its Enqueued record, every schedule and every retry's
// delay: replay brings them back. A PayloadJournal (such as the wal
// package's) also keeps the payloads' bytes for the Manager, which reads
// them back as offsets are claimed; on any other Journal, the Manager
// keeps them in memory too. See the wal package.
func WithJournal(j Journal) Option {
	return optionFunc(func(c *Config) { c.Journal = j })
}

// ErrJournalFailed is returned, wrapping the journal's error, by the call
// whose record could not be made durable and by every call after it: the
// Manager fails closed rather than acknowledge what a crash could undo.
// Recover by closing the Manager, reopening the journal and building a new
// Manager on it.
var ErrJournalFailed = errors.New("worklease: journal failed")

// ErrJournalInUse is returned by New, wrapped, when its journal already
// serves another Manager (see Journal.ReplayRecords): two Managers writing
// to one journal would interleave records that replay cannot apply. New
// leaves that journal open for the Manager using it.
var ErrJournalInUse = errors.New("worklease: journal in use by another Manager")

// ErrReplay is returned by New when a journal's records cannot be applied:
// a record breaks an invariant of the state before it (it grants a lease
// while one is held, finishes a lease it does not hold, queues a terminal
// offset, …), or a snapshot or record does not decode.
// The error is a *ReplayError.
var ErrReplay = errors.New("worklease: journal replay failed")

// ReplayError reports the record that replay could not apply.
type ReplayError struct {
	Seq    uint64 // the record's sequence number; 0 for the snapshot
	Record Record // the record, when it decoded
	Err    error  // what was wrong
}

// Error implements error.
func (e *ReplayError) Error() string {
	if e.Seq == 0 {
		return fmt.Sprintf("worklease: journal replay: snapshot: %v", e.Err)
	}
	return fmt.Sprintf("worklease: journal replay: record %d (%v on domain %s, offset %d): %v",
		e.Seq, e.Record.Kind, shortDomain(e.Record.Domain), e.Record.Offset, e.Err)
}

// Is reports whether target is ErrReplay.
func (e *ReplayError) Is(target error) bool { return target == ErrReplay }

// Unwrap returns what was wrong.
func (e *ReplayError) Unwrap() error { return e.Err }

// A Record is one transition of one domain as a Journal stores it (or,
// with Kind RecordSettings, how the records after it read): the
// Event an observer sees, plus the facts replay needs so that it never
// re-derives them from options that may have changed (a failure says
// whether it was final by being followed by a DeadLettered record, an
// enqueue says where it went, a grant carries its expiry). Rejections
// change nothing and are not journaled.
type Record struct {
	Kind    EventKind
	Domain  string
	Offset  int64 // -1 when the transition concerns no offset
	Attempt int
	Token   Token
	Cause   string // the text of the event's cause; "" if none
	// At is when the transition happened, by the Manager's clock. It is
	// zero where the Manager read no clock: in the records of Succeed,
	// Extend, Inspect and Forget when leases never expire and no observer
	// is configured, which replay applies without a time.
	At time.Time

	// AcquiredAt and Retries: for EventAcquired, EventRequeued,
	// EventRetrying and EventExtended, the offset's first grant and its
	// failed attempts so far (after a retry, this one included). A
	// Requeued record of the offset in flight follows the Retrying record
	// of a Retry, and ends the lease; the delay Retry was given is not
	// journaled. Attempt counts
	// force-released attempts too, which Retries does not: an Acquired
	// record's Attempt is the attempt it starts, a Requeued record's the
	// attempts made so far. (Journals written before Attempt counted them
	// hold Retries+1 and Retries, which replay as such.)
	AcquiredAt time.Time
	Retries    int
	// ExpiresAt: for EventAcquired, EventRetrying and EventExtended, the
	// lease's expiry after the transition; zero if it never expires.
	ExpiresAt time.Time
	// Front: for EventEnqueued, the offset went to the front of the backlog
	// (LIFO ordering) rather than the back.
	Front bool
	// Monotonic: for RecordSettings, the records after it were written by
	// a Manager WithMonotonicOffsets. (It sits beside Front, in what would
	// be padding: journals copy records by value on every call.)
	Monotonic bool
	// Fence: for EventForgotten, the domain's last fence, which fences of a
	// domain of the same name stay above.
	Fence uint64

	// Payload: for EventEnqueued, what the offset was stored with; nil for
	// nothing (an empty payload is not nil). The journal holds it until the
	// offset succeeds or is cancelled: replay gives it back, and a
	// PayloadJournal reads it back meanwhile.
	Payload []byte
	// NotBefore: for EventEnqueued, the time before which the offset may
	// not be granted (EnqueueAt, Append's NotBefore); for the
	// EventRequeued of a Retry with a delay, when the delay ends. Zero for
	// none.
	NotBefore time.Time
	// Key: for the EventEnqueued of an Append with an idempotency key,
	// the key.
	Key string
}

// settingsRecord returns the RecordSettings record that states p.
func settingsRecord(p *policy) Record {
	return Record{Kind: RecordSettings, Offset: -1, Monotonic: p.monotonic}
}

// changeOf returns the change a journaled record holds; its domain and
// time are the caller's to read.
func changeOf(rec *Record) change {
	c := change{
		kind: rec.Kind, front: rec.Front, offset: rec.Offset, attempt: rec.Attempt, retries: rec.Retries, token: rec.Token,
		acquiredAt: instantOf(rec.AcquiredAt), expiresAt: instantOf(rec.ExpiresAt), cause: causeFromText(rec.Cause),
		notBefore: instantOf(rec.NotBefore),
	}
	if rec.Payload != nil || rec.Key != "" {
		c.put = &enqueueData{payload: rec.Payload, key: rec.Key}
		if rec.Key != "" {
			c.put.sum = payloadSum(rec.Payload)
		}
	}
	return c
}

// setRecord makes rec, a zero Record, the journal record of c, a change of
// domain made at at. A journal keeps times as Unix time; their zone does
// not matter. It fills the record in place, field by field: a Record is
// about 250 bytes, and the journaled hot path copied each one four times
// when it was returned and passed by value.
func setRecord(rec *Record, c *change, domain string, at instant) {
	rec.Kind, rec.Domain, rec.Offset, rec.Front = c.kind, domain, c.offset, c.front
	rec.Attempt, rec.Retries, rec.Token = c.attempt, c.retries, c.token
	rec.At = at.in(time.UTC)
	if c.acquiredAt == at { // a first grant: the common case, and a conversion saved
		rec.AcquiredAt = rec.At
	} else {
		rec.AcquiredAt = c.acquiredAt.in(time.UTC)
	}
	rec.ExpiresAt = c.expiresAt.in(time.UTC)
	if c.cause != nil {
		rec.Cause = c.cause.Error()
	}
	if c.notBefore != 0 {
		rec.NotBefore = c.notBefore.time(time.UTC)
	}
	if c.put != nil {
		rec.Payload, rec.Key = c.put.payload, c.put.key
	}
}

// The append path. A call journals its changes as it ends its step on a
// domain, under the domain's lock (see endStep), so that the journal holds
// each domain's records in the order of its transitions; it waits for them
// to be durable after releasing the lock, so that concurrent calls share
// the journal's flushes (see waitDurable).

// journalChanges appends the changes st kept of r, which is locked, to the
// journal, each as a record that becomes r's latest. It returns the
// journal's first error; nothing is journaled after it.
func (m *Manager) journalChanges(r *domainRecord, st *step) error {
	for i := range st.n {
		c := st.change(i)
		if !c.journaled() {
			continue
		}
		var rec Record
		setRecord(&rec, c, r.domain, st.now)
		if c.kind == EventForgotten {
			// The domain's fence: a new record of the domain starts above
			// it, after a replay too.
			rec.Fence = r.state.issued.fence
		}
		if err := m.appendRecord(r, &rec); err != nil {
			return err
		}
		if rec.Payload != nil && m.payloads != nil {
			// The journal holds the bytes now, and gives them back.
			r.state.heldAt(c.offset, r.lastSeq)
		}
		if c.kind == EventForgotten {
			m.snapshots.forgotten(r.domain, r.lastSeq) // a snapshot under way learns of it
		}
	}
	return nil
}

// appendRecord appends rec, a record of r, which is locked, to the
// journal, and makes it r's latest. The first record a Manager journals
// after New is preceded by one that says how the journal reads (see
// appendSettings).
func (m *Manager) appendRecord(r *domainRecord, rec *Record) error {
	if m.settingsDue.Load() {
		if err := m.appendSettings(); err != nil {
			return err
		}
	}
	seq, err := m.journal.AppendRecord(*rec)
	if err != nil {
		return err
	}
	r.lastSeq = seq
	return nil
}

// appendSettings journals a RecordSettings record stating the Manager's
// setting, once, ahead of every other record a call journals after New.
// Calls on other domains that get here meanwhile wait for it, under their
// domain's lock, so that their records follow it.
func (m *Manager) appendSettings() error {
	m.settingsMu.Lock()
	defer m.settingsMu.Unlock()
	if !m.settingsDue.Load() {
		return nil
	}
	if _, err := m.journal.AppendRecord(settingsRecord(&m.policy)); err != nil {
		return err
	}
	m.settingsDue.Store(false)
	return nil
}

// waitDurable waits until the journal holds every record up to seq: the
// latest record of the domains a call wrote to or read, which its answer
// depends on. appendErr is an error the call met appending its records.
// It, or a failed wait, closes the Manager for good, and waitDurable
// returns why; the call returns that instead of its answer. With nothing
// to wait for (no journal, no record) it returns nil at once, inline.
func (m *Manager) waitDurable(seq uint64, appendErr error) error {
	if seq == 0 && appendErr == nil {
		return nil
	}
	return m.waitJournal(seq, appendErr)
}

// waitJournal is waitDurable with something to wait for.
func (m *Manager) waitJournal(seq uint64, appendErr error) error {
	err := appendErr
	if err == nil {
		if err = m.journal.Wait(seq); err == nil {
			m.snapshots.maybeStart(m)
			return nil
		}
	}
	return m.failJournal(err)
}

// failJournal closes the Manager for good because its journal failed with
// err, unless it failed before, and returns why: every call returns that
// from now on.
func (m *Manager) failJournal(err error) error {
	failed := fmt.Errorf("%w: %w", ErrJournalFailed, err)
	m.failure.CompareAndSwap(nil, &failed)
	m.open.Store(false)
	m.stopPulling() // waiting claims learn why from their next claim
	return *m.failure.Load()
}
