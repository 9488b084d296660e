package worklease

import (
	"errors"
	"fmt"
)

// checkInvariants checks seed 000's invariants, and the data structures' own,
// on every domain, and returns every violation it finds. Tests call it after
// every step; it takes each record's lock in turn, so it may run while other
// goroutines use the Manager.
func (m *Manager) checkInvariants() error {
	var errs []error
	m.forEachRecord(func(domain string, r *record) {
		r.mu.Lock()
		err := r.state.checkInvariants(m.instance)
		r.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("domain %q: %w", domain, err))
		}
	})
	return errors.Join(errs...)
}

// checkInvariants checks one domain. s's record lock must be held.
func (s *domainState) checkInvariants(instance uint64) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// Tokens: every grant comes from this domain's serial and the Manager's
	// instance, and fences only grow.
	if s.issued.instance != instance || s.issued.domain == 0 {
		bad("issued token %v does not belong to this manager's domain", s.issued)
	}
	// 1. Single in-flight unit, and 5. token fencing: the lease, if any, is
	// the latest grant.
	if s.leased {
		if s.lease.token != s.issued || s.lease.token.fence == 0 {
			bad("lease token %v is not the latest grant %v", s.lease.token, s.issued)
		}
		if s.lease.retries < 0 {
			bad("lease retry count %d is negative", s.lease.retries)
		}
	} else if s.lease != (lease{}) {
		bad("idle domain keeps a lease %+v", s.lease)
	}
	// 2. Disjointness and 4. idempotence: the current offset and the backlog
	// hold no terminal offset, and the current offset is not queued.
	if s.leased {
		off := s.lease.offset
		if s.processed.contains(off) || s.failed.contains(off) || s.backlog.contains(off) {
			bad("current offset %d is also processed, failed or queued", off)
		}
	}
	seen := make(map[int64]bool, s.backlog.len())
	for i := range s.backlog.len() {
		x := s.backlog.at(i)
		if seen[x] {
			bad("backlog holds %d twice", x)
		}
		seen[x] = true
		if s.processed.contains(x) || s.failed.contains(x) {
			bad("backlog holds terminal offset %d", x)
		}
		if !s.backlog.contains(x) {
			bad("backlog index misses %d", x)
		}
	}
	if s.backlog.index != nil && len(s.backlog.index) != s.backlog.len() {
		bad("backlog index has %d entries for %d offsets", len(s.backlog.index), s.backlog.len())
	}
	s.processed.all(func(x int64) bool {
		if s.failed.contains(x) {
			bad("offset %d is both processed and failed", x)
		}
		return true
	})
	if err := s.processed.check(); err != nil {
		bad("processed: %w", err)
	}
	if err := s.failed.check(); err != nil {
		bad("failed: %w", err)
	}
	return errors.Join(errs...)
}

// check verifies the set's representation: runs sorted, disjoint, not
// adjacent, non-negative, and counted right.
func (s *offsetSet) check() error {
	var n int64
	for i, r := range s.runs {
		if r.lo < 0 || r.hi < r.lo {
			return fmt.Errorf("run %d is [%d, %d]", i, r.lo, r.hi)
		}
		if i > 0 && s.runs[i-1].hi >= r.lo-1 {
			return fmt.Errorf("runs %d and %d overlap or touch", i-1, i)
		}
		n += r.hi - r.lo + 1
	}
	if n != s.n {
		return fmt.Errorf("holds %d offsets but counts %d", n, s.n)
	}
	return nil
}
