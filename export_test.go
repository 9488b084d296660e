package worklease

import "io"

// Hooks for the black-box tests in package worklease_test.

// CheckInvariants checks every domain of m against the contract's invariants
// (see the package documentation) and the Manager's own. Run it when no Reap
// is under way: Reap briefly takes leases out of the expiry index.
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
// It panics for a Manager with WithMonotonicOffsets, whose processed set
// may span every offset: use TerminalRuns and CountsProcessed there.
func Terminal(m *Manager, domain string) (processed, failed []int64) {
	if m.policy.monotonic {
		panic("Terminal: the processed set of WithMonotonicOffsets is a watermark; use TerminalRuns")
	}
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return nil, nil
	}
	defer r.mu.Unlock()
	processed = members(&r.state.processed)
	if r.state.failed().len() > 0 {
		failed = r.state.failed().offsets()
	}
	return processed, failed
}

// RawToken builds a token from its parts, any of them zero, for tests of
// parsing and fencing; NewToken refuses zero parts.
func RawToken(fence, serial, instance uint64) Token {
	return Token{fence: fence, serial: serial, instance: instance}
}

// EncodeSnapshot writes m's snapshot to w.
func EncodeSnapshot(m *Manager, w io.Writer) error { return m.encodeSnapshot(w, nil) }

// TerminalRuns returns domain's terminal offsets as they are stored: the
// processed set's runs, [lo, hi] each, in ascending order (with
// WithMonotonicOffsets, none or the one run [0, hw]), and the failed offsets
// in ascending order.
func TerminalRuns(m *Manager, domain string) (processed [][2]int64, failed []int64) {
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return nil, nil
	}
	defer r.mu.Unlock()
	for _, run := range r.state.processed.runs() {
		processed = append(processed, [2]int64{run.lo, run.hi})
	}
	if r.state.failed().len() > 0 {
		failed = r.state.failed().offsets()
	}
	return processed, failed
}

// CountsProcessed reports whether offset counts as processed in domain, the
// check behind TryAcquire's AlreadyProcessed, without changing anything: it
// revokes no expired lease.
func CountsProcessed(m *Manager, domain string, offset int64) bool {
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return false
	}
	defer r.mu.Unlock()
	return r.state.isProcessed(&m.policy, offset)
}

// HasColdPart reports whether domain's state has allocated the part that
// most domains never need (dead letters, carried attempts, a revoked token,
// a lease restored from another Manager).
func HasColdPart(m *Manager, domain string) bool {
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return false
	}
	defer r.mu.Unlock()
	return r.state.cold != nil
}

// Pulling reports whether m keeps a ready queue: whether a pull call made
// one.
func Pulling(m *Manager) bool { return m.ready.Load() != nil }
