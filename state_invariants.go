package worklease

import (
	"errors"
	"fmt"
)

// checkInvariants checks one domain under p. s's record lock must be held.
func (s *domainState) checkInvariants(p *policy) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// Tokens: every grant comes from this domain's serial and the Manager's
	// instance, and fences only grow.
	if s.issued.serial == 0 || p.instance == 0 {
		bad("issued token %v does not belong to this manager's domain", s.issuedToken(p))
	}
	c := s.cold
	// 1. Single in-flight unit, and 5. token fencing: the lease, if any, is
	// the latest grant.
	if s.leased {
		// After a restart the lease may have been granted by the Manager
		// before, under another instance: its fence is what must match.
		if tok := s.leaseToken(p); tok.fence != s.issued.fence || tok.fence == 0 {
			bad("lease token %v is not the latest grant %v", tok, s.issuedToken(p))
		}
		if c != nil && c.leaseToken == s.issuedToken(p) {
			bad("lease token %v is kept apart although this manager issued it", c.leaseToken)
		}
		if s.lease.retries < 0 {
			bad("lease retry count %d is negative", s.lease.retries)
		}
	} else if s.lease != (lease{}) || s.released != 0 || (c != nil && !c.leaseToken.IsZero()) {
		bad("idle domain keeps a lease %+v, %d released", s.lease, s.released)
	}
	// 2. Disjointness and 4. idempotence: the current offset and the backlog
	// hold no terminal offset, and the current offset is not queued.
	if s.leased {
		off := s.lease.offset
		if s.isProcessed(p, off) || s.isFailed(off) || s.backlog.contains(off) {
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
		if s.isProcessed(p, x) || s.isFailed(x) {
			bad("backlog holds terminal offset %d", x)
		}
		if !s.backlog.contains(x) {
			bad("backlog index misses %d", x)
		}
	}
	if b := s.backlog; b != nil {
		if b.index != nil && len(b.index) != b.len() {
			bad("backlog index has %d entries for %d offsets", len(b.index), b.len())
		}
		if err := b.check(); err != nil {
			bad("backlog: %w", err)
		}
	}
	var failed map[int64]deadLetter
	if c != nil {
		failed = c.failed.m
	}
	for off := range failed {
		if s.isProcessed(p, off) {
			bad("offset %d is both processed and failed", off)
		}
	}
	// With WithMonotonicOffsets, processed is the watermark's run [0, hw],
	// and hw is the highest terminal offset: no failed offset is above it.
	if p.monotonic && s.processed.numRuns() > 0 {
		if r := s.processed.runs(); len(r) != 1 || r[0].lo != 0 {
			bad("monotonic processed set is not one run from 0: %v", r)
		} else {
			for off := range failed {
				if off > r[0].hi {
					bad("failed offset %d is above the highest terminal offset %d", off, r[0].hi)
				}
			}
		}
	} else if p.monotonic && len(failed) > 0 {
		bad("failed offsets but no highest terminal offset")
	}
	if err := s.processed.check(); err != nil {
		bad("processed: %w", err)
	}
	if c == nil {
		return errors.Join(errs...)
	}
	if c.failed.m != nil && len(c.failed.m) == 0 {
		bad("empty dead-letter map kept")
	}
	if len(c.failed.byTime) != len(c.failed.m) {
		bad("%d dead letters by time for %d dead letters", len(c.failed.byTime), len(c.failed.m))
	}
	for i, k := range c.failed.byTime {
		if dl, ok := c.failed.m[k.offset]; !ok || dl.at != k.at {
			bad("dead letter %d by time is not the dead letter of offset %d", i, k.offset)
		}
		if i > 0 && c.failed.byTime[i-1].compare(k) >= 0 {
			bad("dead letters by time out of order at %d", i)
		}
	}
	// Attempts carried over belong to queued offsets only.
	for off := range c.carried {
		if !s.backlog.contains(off) {
			bad("carried attempts for %d, which is not queued", off)
		}
	}
	if c.carried != nil && len(c.carried) == 0 {
		bad("empty carried map kept")
	}
	if !c.revoked.IsZero() && (c.revoked.fence > s.issued.fence || c.revokedErr == nil) {
		bad("revoked token %v was never issued or has no reason", c.revoked)
	}
	if c.revoked.IsZero() != (c.revokedErr == nil) {
		bad("revoked token %v with reason %v", c.revoked, c.revokedErr)
	}
	// Payloads belong to offsets that are queued, in flight or failed.
	for off := range c.payloads {
		if !s.backlog.contains(off) && !(s.leased && s.lease.offset == off) && !s.isFailed(off) {
			bad("payload kept for %d, which is neither queued, in flight nor failed", off)
		}
	}
	if c.payloads != nil && len(c.payloads) == 0 {
		bad("empty payload map kept")
	}
	for off, pl := range c.payloads {
		if (pl.data == nil) == (pl.seq == 0) {
			bad("payload of %d kept both in memory and in the journal, or neither", off)
		}
	}
	// Schedules belong to queued offsets, and a retry's delay to an idle
	// domain with a backlog.
	for off, at := range c.scheduled {
		if !s.backlog.contains(off) || at == 0 {
			bad("offset %d scheduled at %d, and not queued", off, at)
		}
	}
	if c.scheduled != nil && len(c.scheduled) == 0 {
		bad("empty schedule map kept")
	}
	if c.retryAt != 0 && (s.leased || s.backlog.len() == 0) {
		bad("a retry's delay on a domain that is leased or has no backlog")
	}
	if ks := c.keys; ks != nil {
		if len(ks.m) == 0 {
			bad("empty key set kept")
		}
		if n := len(ks.all()); n != len(ks.m) {
			bad("%d keys in the order they were stored, %d kept", n, len(ks.m))
		}
	}
	if c.failed.m == nil && c.carried == nil && c.leaseToken.IsZero() && c.revoked.IsZero() && c.payloads == nil &&
		c.scheduled == nil && c.retryAt == 0 && c.keys == nil {
		bad("empty cold part kept")
	}
	return errors.Join(errs...)
}

// check verifies the set's representation: runs sorted, disjoint, not
// adjacent and non-negative, and an empty set holding nothing.
func (s *offsetSet) check() error {
	runs := s.runs()
	if s.end == 0 && (s.lo != 0 || s.earlier != nil) {
		return fmt.Errorf("an empty set holds runs")
	}
	for i, r := range runs {
		if r.lo < 0 || r.hi < r.lo {
			return fmt.Errorf("run %d is [%d, %d]", i, r.lo, r.hi)
		}
		if i > 0 && runs[i-1].hi >= r.lo-1 {
			return fmt.Errorf("runs %d and %d overlap or touch", i-1, i)
		}
	}
	return nil
}
