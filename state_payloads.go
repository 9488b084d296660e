package worklease

// The payloads Enqueue, EnqueueAt and Append store, kept in a domain's cold
// part by the domains that have them (see domainCold.payloads), from the
// offset's Enqueued change until it succeeds or is cancelled.

// A payload is what a producer stored with an offset: its bytes, or where
// the Manager's journal holds them. An Enqueued change carries the bytes,
// and applying it keeps them in data; a Manager whose journal gives
// payloads back (see PayloadJournal) then replaces them with the sequence
// number of the record that holds them (see heldAt), so that a deep
// backlog costs memory for its offsets, not for their payloads. Stored
// bytes are never changed: a copy of the value may be read after the
// domain's lock is released.
type payload struct {
	// data is the payload's bytes, unless seq says where they are. An empty
	// payload is a non-nil empty slice: "no payload" is no entry at all.
	data []byte
	// seq is the journal record whose Payload holds the bytes; 0 if data
	// does.
	seq uint64
}

// payloadOf returns the payload offset was stored with, and false if none.
func (s *domainState) payloadOf(offset int64) (payload, bool) {
	if s.cold == nil || s.cold.payloads == nil {
		return payload{}, false
	}
	pl, ok := s.cold.payloads[offset]
	return pl, ok
}

// keepPayload keeps data, which must not be nil, as offset's payload.
func (s *domainState) keepPayload(offset int64, data []byte) {
	c := s.coldPart()
	if c.payloads == nil {
		c.payloads = make(map[int64]payload)
	}
	c.payloads[offset] = payload{data: data}
}

// heldAt notes that the journal record seq holds offset's payload, whose
// bytes the domain then lets go of. It does nothing if offset has no
// payload.
func (s *domainState) heldAt(offset int64, seq uint64) {
	if _, ok := s.payloadOf(offset); ok {
		s.cold.payloads[offset] = payload{seq: seq}
	}
}

// dropPayload forgets offset's payload, if it has one: the offset
// succeeded or was cancelled.
func (s *domainState) dropPayload(offset int64) {
	if c := s.cold; c != nil && dropOffset(&c.payloads, offset) {
		s.trimCold()
	}
}
