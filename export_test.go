package worklease

import "io"

// Hooks for the black-box tests in package worklease_test.

// CheckInvariants checks every domain of m against seed 000's invariants and
// the Manager's own. Run it when no Reap is under way: Reap briefly takes
// leases out of the expiry index.
func CheckInvariants(m *Manager) error { return m.checkInvariants() }

// RecordOf returns the identity of domain's record (nil if none), so tests can
// check that a record is never replaced.
func RecordOf(m *Manager, domain string) any {
	if _, r := m.lockRecord(domain, false); r != nil {
		r.mu.Unlock()
		return r
	}
	return nil
}

// Terminal returns domain's processed and failed offsets in ascending order.
func Terminal(m *Manager, domain string) (processed, failed []int64) {
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return nil, nil
	}
	defer r.mu.Unlock()
	r.state.processed.all(func(x int64) bool { processed = append(processed, x); return true })
	if r.state.failed.len() > 0 {
		failed = r.state.failed.offsets()
	}
	return processed, failed
}

// NewToken builds a token from its parts, for tests of parsing and fencing.
func NewToken(fence, domain, instance uint64) Token {
	return Token{fence: fence, domain: domain, instance: instance}
}

// EncodeSnapshot writes m's snapshot to w.
func EncodeSnapshot(m *Manager, w io.Writer) error { return m.encodeSnapshot(w) }
