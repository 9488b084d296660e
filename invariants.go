package worklease

import (
	"errors"
	"fmt"
	"time"
)

// checkInvariants checks the contract's invariants, and the data structures' own,
// on every domain, and returns every violation it finds. Tests call it after
// every step; it takes each record's lock in turn, so it may run while other
// goroutines use the Manager.
func (m *Manager) checkInvariants() error {
	var errs []error
	q := m.ready.Load()
	listed := 0 // records the ready queue lists
	m.forEachRecord(func(sh *shard, domain string, r *domainRecord) {
		r.mu.Lock()
		err := r.state.checkInvariants(&m.policy)
		if err == nil && !r.dropped {
			err = sh.expiry.check(r)
		}
		if err == nil && r.listed != (q != nil && !r.dropped && r.state.ready()) {
			err = fmt.Errorf("listed in the ready queue: %t, ready: %t", r.listed, r.state.ready())
		}
		if err == nil {
			err = sh.checkDead(r)
		}
		if r.listed {
			listed++
		}
		r.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("domain %q: %w", domain, err))
		}
	})
	if q != nil {
		if err := q.check(listed); err != nil {
			errs = append(errs, err)
		}
	}
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
	sh.records.all(func(h uint64, r *domainRecord) {
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

// checkHeap verifies the index's heap order and back-references.
func (x *expiryIndex) checkHeap() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, e := range x.heap {
		if int(e.r.heapIdx) != i+1 {
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
func (x *expiryIndex) check(r *domainRecord) error {
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

// checkDead checks that sh's dead set holds r, which is locked, with the
// time of its latest failure, exactly while r has dead letters and is not
// dropped.
func (sh *shard) checkDead(r *domainRecord) error {
	d := r.state.failed()
	has := !r.dropped && d.len() > 0
	sh.mu.Lock()
	latest, in := sh.dead[r]
	sh.mu.Unlock()
	switch {
	case has != in || has != r.dead:
		return fmt.Errorf("dead letters: %t, in the shard's dead set: %t, marked: %t", has, in, r.dead)
	case has && latest != d.byTime[len(d.byTime)-1].at:
		return fmt.Errorf("the shard's dead set has the latest failure at %v; it is at %v", latest, d.byTime[len(d.byTime)-1].at)
	}
	return nil
}
