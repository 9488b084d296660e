package worklease

import (
	"errors"
	"fmt"
	"time"
)

// checkInvariants checks seed 000's invariants, and the data structures' own,
// on every domain, and returns every violation it finds. Tests call it after
// every step; it takes each record's lock in turn, so it may run while other
// goroutines use the Manager.
func (m *Manager) checkInvariants() error {
	var errs []error
	m.forEachRecord(func(sh *shard, domain string, r *record) {
		r.mu.Lock()
		err := r.state.checkInvariants(&m.policy, m.instance)
		if err == nil && !r.dropped {
			err = sh.expiry.check(r)
		}
		r.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("domain %q: %w", domain, err))
		}
	})
	for i := range m.shards {
		if err := m.shards[i].expiry.checkHeap(); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
		if err := m.checkMap(&m.shards[i]); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// checkMap checks sh's map of records: its table's own rules, and that
// every record is there once, under its domain's hash, in the shard that
// hash picks.
func (m *Manager) checkMap(sh *shard) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if msg := sh.records.check(); msg != "" {
		return errors.New(msg)
	}
	var errs []error
	seen := make(map[string]bool)
	sh.records.all(func(h uint64, r *record) {
		switch {
		case h != m.hash(r.domain):
			errs = append(errs, fmt.Errorf("domain %q is filed under another hash", r.domain))
		case m.shardOf(h) != sh:
			errs = append(errs, fmt.Errorf("domain %q is in the wrong shard", r.domain))
		case seen[r.domain]:
			errs = append(errs, fmt.Errorf("domain %q has two records", r.domain))
		}
		seen[r.domain] = true
	})
	return errors.Join(errs...)
}

// checkInvariants checks one domain under p. s's record lock must be held.
func (s *domainState) checkInvariants(p *policy, instance uint64) error {
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
		// After a restart the lease may have been granted by the Manager
		// before, under another instance: its fence is what must match.
		if s.lease.token.fence != s.issued.fence || s.lease.token.fence == 0 {
			bad("lease token %v is not the latest grant %v", s.lease.token, s.issued)
		}
		if s.lease.retries < 0 {
			bad("lease retry count %d is negative", s.lease.retries)
		}
	} else if s.lease != (lease{}) || s.released != 0 {
		bad("idle domain keeps a lease %+v, %d released", s.lease, s.released)
	}
	// 2. Disjointness and 4. idempotence: the current offset and the backlog
	// hold no terminal offset, and the current offset is not queued.
	if s.leased {
		off := s.lease.offset
		if s.isProcessed(p, off) || s.failed.contains(off) || s.backlog.contains(off) {
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
		if s.isProcessed(p, x) || s.failed.contains(x) {
			bad("backlog holds terminal offset %d", x)
		}
		if !s.backlog.contains(x) {
			bad("backlog index misses %d", x)
		}
	}
	if s.backlog.index != nil && len(s.backlog.index) != s.backlog.len() {
		bad("backlog index has %d entries for %d offsets", len(s.backlog.index), s.backlog.len())
	}
	if err := s.backlog.check(); err != nil {
		bad("backlog: %w", err)
	}
	for off := range s.failed.m {
		if s.isProcessed(p, off) {
			bad("offset %d is both processed and failed", off)
		}
	}
	// With WithMonotonicOffsets, processed is the watermark's run [0, hw],
	// and hw is the highest terminal offset: no failed offset is above it.
	if p.monotonic && len(s.processed.runs) > 0 {
		if r := s.processed.runs; len(r) != 1 || r[0].lo != 0 {
			bad("monotonic processed set is not one run from 0: %v", r)
		} else {
			for off := range s.failed.m {
				if off > r[0].hi {
					bad("failed offset %d is above the highest terminal offset %d", off, r[0].hi)
				}
			}
		}
	} else if p.monotonic && s.failed.len() > 0 {
		bad("failed offsets but no highest terminal offset")
	}
	if s.failed.m != nil && len(s.failed.m) == 0 {
		bad("empty dead-letter map kept")
	}
	if err := s.processed.check(); err != nil {
		bad("processed: %w", err)
	}
	// Attempts carried over belong to queued offsets only.
	for off := range s.carried {
		if !s.backlog.contains(off) {
			bad("carried attempts for %d, which is not queued", off)
		}
	}
	if s.carried != nil && len(s.carried) == 0 {
		bad("empty carried map kept")
	}
	if !s.revoked.IsZero() && (s.revoked.fence > s.issued.fence || s.revokedErr == nil) {
		bad("revoked token %v was never issued or has no reason", s.revoked)
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

// checkHeap verifies the index's heap order and back-references.
func (x *expiryIndex) checkHeap() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, e := range x.heap {
		if e.r.heapIdx != i+1 {
			return fmt.Errorf("expiry index entry %d has heapIdx %d", i, e.r.heapIdx)
		}
		if i > 0 && x.heap[(i-1)/2].at > e.at {
			return fmt.Errorf("expiry index is not a heap at %d", i)
		}
	}
	return nil
}

// check verifies that the index holds r's lease expiry exactly when r has
// one. r.mu must be held.
func (x *expiryIndex) check(r *record) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := &r.state
	want := s.leased && s.lease.expiresAt != 0
	if !want {
		if r.heapIdx != 0 {
			return fmt.Errorf("idle or never-expiring lease is in the expiry index")
		}
		return nil
	}
	if r.heapIdx == 0 {
		return fmt.Errorf("lease expiring at %v is missing from the expiry index", s.lease.expiresAt.in(time.UTC))
	}
	if got, want := x.heap[r.heapIdx-1].at, s.lease.expiresAt; got != want {
		return fmt.Errorf("expiry index has %d for a lease expiring at %d", got, want)
	}
	return nil
}
