package worklease

// Hooks for the black-box tests in package worklease_test.

// CheckInvariants checks every domain of m against seed 000's invariants.
func CheckInvariants(m *Manager) error { return m.checkInvariants() }

// RecordOf returns the identity of domain's record (nil if none), so tests can
// check that a record is never replaced.
func RecordOf(m *Manager, domain string) any {
	if r := m.lookup(domain); r != nil {
		return r
	}
	return nil
}

// Terminal returns domain's processed and failed offsets in ascending order.
func Terminal(m *Manager, domain string) (processed, failed []int64) {
	r := m.lookup(domain)
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state.processed.all(func(x int64) bool { processed = append(processed, x); return true })
	r.state.failed.all(func(x int64) bool { failed = append(failed, x); return true })
	return processed, failed
}

// NewToken builds a token from its parts, for tests of parsing and fencing.
func NewToken(fence, domain, instance uint64) Token {
	return Token{fence: fence, domain: domain, instance: instance}
}
