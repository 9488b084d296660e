package worklease

import (
	"bytes"
	"fmt"
	"time"
)

// The producers' calls: Enqueue stores an offset the caller chose, EnqueueAt
// one that may not run before a time, and Append one the domain assigns,
// with an idempotency key for a call repeated after an unknown outcome.
// Each keeps its payload until the offset succeeds (in the journal, with
// one), refuses one larger than the Manager's limit, and refuses to store
// another payload for an offset it holds already.

// AppendOptions are Append's optional parts. The zero value is an Append
// with no key, which may run at once.
type AppendOptions struct {
	// Key is an idempotency key, at most MaxKeyLen bytes; "" for none.
	// Within the key window (WithKeyWindow; 24 hours by default) after an
	// Append on the domain with this key, another with the same key
	// stores nothing and returns the first one's offset: a call repeated
	// after its outcome was lost (a timeout, a crash) is stored once. With
	// another payload than the first one's, it is refused with
	// ErrPayloadMismatch.
	Key string
	// NotBefore, if later than now, is the time before which the offset
	// may not be granted; the domain's later offsets wait behind it (see
	// EnqueueAt). Zero: at once.
	NotBefore time.Time
}

// Enqueue stores offset at the back of domain's backlog (the front, with
// LIFO ordering) with payload, for Claim to lease in its turn. It never
// grants a lease itself, even on an idle domain. The status is Enqueued
// for an offset it stored; for one the domain holds already it stores
// nothing, and says so: AlreadyQueued for an offset queued, AlreadyAcquired
// for the offset in flight, AlreadyProcessed or AlreadyFailed for a
// terminal one, whose answer does not change (until Redrive, or Forget),
// so that (domain, offset) is an idempotency key. If that offset, queued,
// in flight or failed, was stored with another payload (or one without a
// payload, and the other with one), Enqueue returns an error matching
// ErrPayloadMismatch instead: two producers picked the same offset for
// different work, and the second one's is not stored. (A terminal
// offset's payload is gone, and is not compared.) Use Append to have the
// domain assign offsets that never collide.
//
// A nil payload stores none; an empty one is kept as empty. Enqueue keeps
// a copy of payload until the offset succeeds: while it is queued, in
// flight and failed, so that a retry, a takeover after an expiry and a
// Redrive claim it with its payload again. With a journal, the payload is
// journaled with the offset and survives restarts; a PayloadJournal (the
// wal package's) keeps its bytes for the Manager, which reads them back
// when the offset is claimed. A payload longer than the Manager's limit
// (DefaultMaxPayload, WithMaxPayload) is refused with an error matching
// ErrPayloadTooLarge, and nothing is stored.
//
// Enqueue checks its domain and offset as TryAcquire does, first, then the
// payload's length.
func (m *Manager) Enqueue(domain string, offset int64, payload []byte) (AcquireStatus, error) {
	return m.enqueue(&callEnqueue, domain, offset, payload, time.Time{})
}

// EnqueueAt is Enqueue of an offset that may not be granted before
// notBefore: not by Claim, ClaimNext, TryAcquire, SucceedNext or FailNext,
// whatever the domain's order. While it is the head of its domain's
// backlog, the domain grants nothing, as if paused, and the offsets queued
// behind it wait too, so that order holds: Claim leases it once notBefore
// has passed (WaitClaim wakes for it), and TryAcquire of any offset before
// then answers Enqueued, queueing it. A notBefore that is not after the
// Manager's clock is no schedule at all. An offset the domain holds
// already keeps its payload and its time, as Enqueue says; the journal
// keeps the schedule. Nothing wakes a TryAcquire orchestrator at
// notBefore: scheduled work is for the pull calls.
//
// EnqueueAt returns the errors of Enqueue, checked in the same order.
func (m *Manager) EnqueueAt(domain string, offset int64, payload []byte, notBefore time.Time) (AcquireStatus, error) {
	return m.enqueue(&callEnqueueAt, domain, offset, payload, notBefore)
}

// enqueue is Enqueue and EnqueueAt; c is the call.
func (m *Manager) enqueue(c *callSpec, domain string, offset int64, p []byte, notBefore time.Time) (AcquireStatus, error) {
	if m != nil && len(p) > m.maxPayload && m.accepts(domain, offset) {
		return 0, m.tooLarge(c, domain, len(p))
	}
	var put *enqueueData
	if p != nil {
		put = &enqueueData{payload: bytes.Clone(p)} // the caller may reuse its buffer
	}
	sh, r, now, err := m.enterWith(c, domain, offset, false, nil)
	if r == nil {
		return 0, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	status, stored, has := r.state.enqueue(&m.policy, &st, offset, put, instantOf(notBefore))
	if err := m.finish(sh, r, &st, nil); err != nil {
		return 0, err
	}
	if status == Enqueued || status == AlreadyProcessed {
		return status, nil
	}
	// The offset is held already: with the same payload?
	if has != (p != nil) {
		return 0, c.wrap(domain, ErrPayloadMismatch)
	}
	if has {
		same, err := m.samePayload(domain, offset, stored, p)
		if err != nil {
			return 0, err
		}
		if !same {
			return 0, c.wrap(domain, ErrPayloadMismatch)
		}
	}
	return status, nil
}

// Append stores payload for domain under the next offset of the domain's
// order, which it assigns and returns: one more than the highest offset
// the domain holds, queued, in flight, processed or failed (0 for a new
// domain), so that it is queued behind every one of them. The offset is
// unique: Appends on one domain are ordered by the domain's lock, and take
// their offsets in the order they take effect, whichever goroutine makes
// them. The status is Enqueued. The offset is then stored as Enqueue
// stores it (with its payload, in the journal too, and, with
// opts.NotBefore, scheduled as EnqueueAt schedules it).
//
// With opts.Key, an Append that repeats an earlier one on the domain with
// the same key, within the key window (WithKeyWindow), stores nothing: it
// returns that Append's offset with its status now (AlreadyQueued,
// AlreadyAcquired, AlreadyProcessed or AlreadyFailed), or an error
// matching ErrPayloadMismatch if its payload is not that Append's. A key
// costs memory for the window, about 100 bytes plus its length (see
// docs/contract.md), and the journal keeps it.
//
// Assigned and chosen offsets can share a domain, but do not mix well:
// Append assigns above whatever the domain holds, so a chosen offset
// stored later may be lower than assigned ones and wait behind them (FIFO
// is arrival order), and a chosen offset equal to one Append assigned is
// a duplicate (Enqueue answers as for any offset the domain holds). Give
// each domain one kind of producer, or choose offsets from a range Append
// never reaches. After Forget, a domain holds no offset, and Append
// starts again from 0.
//
// Append checks the domain first, then the payload's length
// (ErrPayloadTooLarge) and the key's (ErrInvalidKey), and stores nothing
// if one is refused. Once a domain holds math.MaxInt64, Append returns an
// error matching ErrInvalidOffset.
func (m *Manager) Append(domain string, payload []byte, opts AppendOptions) (AppendResult, error) {
	if m != nil && m.accepts(domain, 0) {
		if len(payload) > m.maxPayload {
			return AppendResult{}, m.tooLarge(&callAppend, domain, len(payload))
		}
		if len(opts.Key) > MaxKeyLen {
			return AppendResult{}, fmt.Errorf("%w: %d bytes, more than %d (Append on domain %s)", ErrInvalidKey, len(opts.Key), MaxKeyLen, shortDomain(domain))
		}
	}
	put := &enqueueData{payload: bytes.Clone(payload), key: opts.Key}
	if opts.Key != "" {
		put.sum = payloadSum(payload)
	}
	sh, r, now, err := m.enterWith(&callAppend, domain, 0, false, nil)
	if r == nil {
		return AppendResult{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	res, err := r.state.appendNext(&m.policy, &st, put, instantOf(opts.NotBefore))
	if ferr := m.finish(sh, r, &st, nil); ferr != nil {
		return AppendResult{}, ferr
	}
	return res, callAppend.wrap(domain, err)
}

// Payload returns what offset of domain was stored with, while the domain
// holds it queued, in flight or failed: a copy, the caller's to keep. It
// returns nil if the offset was stored without one, or is not held (never
// seen, processed, cancelled), and reads it from the journal if that
// holds it (see PayloadJournal). Like DeadLetters, it revokes no expired
// lease and changes nothing.
func (m *Manager) Payload(domain string, offset int64) ([]byte, error) {
	if !m.accepts(domain, offset) {
		return nil, m.refuse(&callPayload, domain, offset)
	}
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return nil, m.absent(nil)
	}
	pl, has := r.state.payloadOf(offset)
	seq := r.lastSeq
	r.mu.Unlock()
	if err := m.waitDurable(seq, nil); err != nil {
		return nil, err
	}
	if !has {
		return nil, nil
	}
	return m.readPayload(domain, offset, pl)
}

// tooLarge is the error of the call c on domain for a payload of n bytes.
func (m *Manager) tooLarge(c *callSpec, domain string, n int) error {
	return fmt.Errorf("%w: %d bytes, more than %d (%s on domain %s)", ErrPayloadTooLarge, n, m.maxPayload, c.op, shortDomain(domain))
}

// samePayload reports whether stored, offset's payload in domain, is p.
func (m *Manager) samePayload(domain string, offset int64, stored payload, p []byte) (bool, error) {
	if stored.seq == 0 {
		return bytes.Equal(stored.data, p), nil
	}
	data, err := m.readPayload(domain, offset, stored)
	if err != nil {
		return false, err
	}
	// A payload gone meanwhile (the offset finished) reads as nil: the
	// call answers as it would have a moment later.
	return data == nil || bytes.Equal(data, p), nil
}

// readPayload returns a copy of pl, offset's payload in domain, read from
// the journal if it holds it. It is called without the domain's lock: a
// stored payload never changes, but the offset may have finished since pl
// was read, and the journal may then have dropped the record. So if the
// journal cannot give it back, readPayload looks at the domain again: if
// the offset no longer has that payload, it returns nil; if it still has
// it, the journal lost it, which fails the Manager closed (see
// ErrJournalFailed).
func (m *Manager) readPayload(domain string, offset int64, pl payload) ([]byte, error) {
	if pl.seq == 0 {
		return bytes.Clone(pl.data), nil
	}
	data, err := m.payloads.ReadPayload(pl.seq)
	if err == nil {
		return data, nil
	}
	if _, r := m.lockRecord(domain, false); r != nil {
		held, has := r.state.payloadOf(offset)
		r.mu.Unlock()
		if !has || held.seq != pl.seq {
			return nil, nil
		}
	} else {
		return nil, m.absent(nil)
	}
	return nil, m.failJournal(fmt.Errorf("reading the payload of %s/%d from record %d: %w", shortDomain(domain), offset, pl.seq, err))
}

// A payloadRead is a payload a call found under a domain's lock, to copy
// into its i-th answer once it has released the lock (see readPayloads).
type payloadRead struct {
	i      int
	domain string
	offset int64
	pl     payload
}

// readPayloads reads each payload of reads into the slot its answer's
// index picks.
func (m *Manager) readPayloads(reads []payloadRead, slot func(i int) *[]byte) error {
	for _, rd := range reads {
		data, err := m.readPayload(rd.domain, rd.offset, rd.pl)
		if err != nil {
			return err
		}
		*slot(rd.i) = data
	}
	return nil
}
