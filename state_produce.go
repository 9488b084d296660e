package worklease

import (
	"hash/crc64"
	"math"
)

// The producers' side of a domain's state: offsets scheduled for later,
// the retry delay of the backlog's head, the idempotency keys of Append,
// and the offset Append assigns next.

// enqueueData is what an Enqueued change stores with its offset besides
// the offset itself.
type enqueueData struct {
	payload []byte // nil: none; an empty payload is not nil
	key     string // Append's idempotency key; "" for none
	sum     uint64 // payloadSum(payload), kept with the key
}

// payloadSum returns the checksum a key keeps of its Append's payload, so
// that a repeated Append with another payload is refused after the
// payload itself is gone: 0 for no payload, and a CRC-64 (ECMA) with its
// lowest bit set for any other, the empty one included. Part of the
// snapshot format: never change it.
func payloadSum(p []byte) uint64 {
	if p == nil {
		return 0
	}
	return crc64.Checksum(p, crc64Table) | 1
}

var crc64Table = crc64.MakeTable(crc64.ECMA)

// scheduledAt returns the time before which offset, which is queued, may
// not be granted; zero if it may be at once.
func (s *domainState) scheduledAt(offset int64) instant {
	if s.cold == nil || s.cold.scheduled == nil {
		return 0
	}
	return s.cold.scheduled[offset]
}

// headWaits reports whether the backlog's head is scheduled for after now:
// the domain then grants nothing, as if paused, until then.
func (s *domainState) headWaits(now instant) bool {
	if s.cold == nil || s.cold.scheduled == nil {
		return false
	}
	head, ok := s.backlog.front()
	return ok && s.cold.scheduled[head] > now
}

// readyAt returns the time from which Claim may lease the backlog's head
// of an idle, running domain: its schedule's or its retry delay's end,
// whichever is later; zero if nothing holds it back.
func (s *domainState) readyAt() instant {
	if s.cold == nil {
		return 0
	}
	at := s.cold.retryAt
	if head, ok := s.backlog.front(); ok {
		at = max(at, s.scheduledAt(head))
	}
	return at
}

// schedule notes that offset, just queued, may not be granted before at.
func (s *domainState) schedule(offset int64, at instant) {
	c := s.coldPart()
	if c.scheduled == nil {
		c.scheduled = make(map[int64]instant)
	}
	c.scheduled[offset] = at
}

// dropScheduled forgets offset's schedule, if it has one: it left the
// backlog.
func (s *domainState) dropScheduled(offset int64) {
	if c := s.cold; c != nil && dropOffset(&c.scheduled, offset) {
		s.trimCold()
	}
}

// endRetryDelay ends the retry delay of the backlog's head, if any.
func (s *domainState) endRetryDelay() {
	if c := s.cold; c != nil && c.retryAt != 0 {
		c.retryAt = 0
		s.trimCold()
	}
}

// nextOffset returns the offset Append assigns next: one more than the
// highest offset the domain holds, queued, in flight, processed or failed
// (every offset an Append assigned is one of these until Forget), or 0 for
// a domain that holds none. It reports false if that offset would be above
// math.MaxInt64.
func (s *domainState) nextOffset() (int64, bool) {
	top := int64(-1)
	if !s.processed.isEmpty() {
		top = s.processed.last().hi
	}
	if s.leased {
		top = max(top, s.lease.offset)
	}
	if s.backlog.len() > 0 {
		top = max(top, s.backlog.max())
	}
	if s.cold != nil {
		for off := range s.cold.failed.m {
			top = max(top, off)
		}
	}
	if top == math.MaxInt64 {
		return 0, false
	}
	return top + 1, true
}

// stateOf returns the status an offset the domain holds answers with, as a
// repeated Append reports it.
func (s *domainState) stateOf(p *policy, offset int64) AcquireStatus {
	switch {
	case s.leased && s.lease.offset == offset:
		return AlreadyAcquired
	case s.isFailed(offset):
		return AlreadyFailed
	case s.backlog.contains(offset):
		return AlreadyQueued
	}
	// Processed, or cancelled, which counts as processed.
	return AlreadyProcessed
}

// appendKeys are the idempotency keys of a domain's recent Appends, each
// with the offset it was assigned, kept for the policy's key window.
type appendKeys struct {
	m map[string]appendKey
	// order holds the keys from head on in the order they were stored,
	// each with the time it was stored then, so that the oldest are
	// forgotten first.
	order []storedKey
	head  int
}

// An appendKey is what a key remembers of its Append.
type appendKey struct {
	offset int64
	sum    uint64  // payloadSum of the Append's payload
	at     instant // when the Append was made
}

// A storedKey is a key in the order keys were stored.
type storedKey struct {
	key string
	at  instant
}

// keyed returns the Append that key names, if it was made within the key
// window before now.
func (s *domainState) keyed(p *policy, key string, now instant) (appendKey, bool) {
	if s.cold == nil || s.cold.keys == nil {
		return appendKey{}, false
	}
	k, ok := s.cold.keys.m[key]
	if !ok || k.at.add(p.keyWindow) <= now {
		return appendKey{}, false
	}
	return k, true
}

// keepKey remembers key for the Append k describes, and forgets the keys
// stored a window or more before it.
func (s *domainState) keepKey(p *policy, key string, k appendKey) {
	c := s.coldPart()
	if c.keys == nil {
		c.keys = &appendKeys{m: make(map[string]appendKey)}
	}
	ks := c.keys
	ks.m[key] = k
	ks.order = append(ks.order, storedKey{key, k.at})
	for ks.head < len(ks.order) {
		old := ks.order[ks.head]
		if old.at.add(p.keyWindow) > k.at {
			break // it and those after it are within the window
		}
		// The key was stored again since, if its time is not this one's.
		if o, ok := ks.m[old.key]; ok && o.at == old.at {
			delete(ks.m, old.key)
		}
		ks.order[ks.head] = storedKey{}
		ks.head++
	}
	if ks.head > 32 && 2*ks.head >= len(ks.order) {
		n := copy(ks.order, ks.order[ks.head:])
		clear(ks.order[n:])
		ks.order, ks.head = ks.order[:n], 0
	}
}

// all returns the keys kept, the oldest first, as a snapshot writes them.
func (ks *appendKeys) all() []string {
	if ks == nil {
		return nil
	}
	out := make([]string, 0, len(ks.m))
	for _, sk := range ks.order[ks.head:] {
		if k, ok := ks.m[sk.key]; ok && k.at == sk.at {
			out = append(out, sk.key)
		}
	}
	return out
}
