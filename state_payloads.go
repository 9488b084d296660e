package worklease

// The payloads Enqueue stores, kept in a domain's cold part by the
// domains that have them (see domainCold.payloads). They are not state a
// journal rebuilds: no change carries them, and a Manager with a journal
// refuses them.

// payloadOf returns the payload offset was enqueued with; nil if none.
func (s *domainState) payloadOf(offset int64) []byte {
	if s.cold == nil || s.cold.payloads == nil {
		return nil
	}
	return s.cold.payloads[offset]
}

// keepPayload keeps payload, which must not be nil, for offset, which was
// just queued.
func (s *domainState) keepPayload(offset int64, payload []byte) {
	c := s.coldPart()
	if c.payloads == nil {
		c.payloads = make(map[int64][]byte)
	}
	c.payloads[offset] = payload
}

// dropPayload forgets offset's payload, if it has one: the offset
// succeeded.
func (s *domainState) dropPayload(offset int64) {
	if c := s.cold; c != nil && dropOffset(&c.payloads, offset) {
		s.trimCold()
	}
}
