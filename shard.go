package worklease

import (
	"hash/maphash"
	"sync"
	"time"
)

// Lock order: record.mu, then shard.expiry.mu. A shard's mu is held only to
// look up, insert or delete a record in its map, and never while taking
// another lock. No goroutine ever holds two record locks at once.

// A shard is one slice of the Manager's domain map, with the expiry index
// and event counters of its domains.
type shard struct {
	mu      sync.RWMutex       // guards records
	records map[string]*record // a record is replaced only after Forget dropped it

	expiry expiryIndex // leases with an expiry, soonest first; empty without a TTL
	stats  counters
}

// A record is one domain's entry in a shard. Once created it is never
// replaced (seed 000 invariant 6) unless Forget drops it, so a pointer to it
// stays valid.
type record struct {
	domain string // immutable

	mu      sync.Mutex  // guards everything below, except heapIdx
	state   domainState // see domainState; never locks
	dropped bool        // Forget removed the domain: look it up again
	events  *eventQueue // nil without an observer
	lastSeq uint64      // the journal sequence number of the domain's latest record
	// expiresAt is the lease expiry the shard's expiry index holds for this
	// record (zero: none). heapIdx is its position there plus one (zero:
	// absent); unlike the rest, it is guarded by the shard's expiry.mu.
	expiresAt time.Time
	heapIdx   int
}

// shardFor returns the shard that holds domain.
func (m *Manager) shardFor(domain string) *shard {
	return &m.shards[maphash.String(m.seed, domain)&m.shardMask]
}

// lockRecord returns domain's shard and record, with the record locked. If
// the domain has no record, lockRecord creates one when create is set and
// otherwise returns a nil record.
func (m *Manager) lockRecord(domain string, create bool) (*shard, *record) {
	sh := m.shardFor(domain)
	for {
		sh.mu.RLock()
		r := sh.records[domain]
		sh.mu.RUnlock()
		if r == nil {
			if !create {
				return sh, nil
			}
			r = m.createRecord(sh, domain)
		}
		r.mu.Lock()
		if !r.dropped {
			return sh, r
		}
		// Forget dropped r after we found it; make sure it is gone from the
		// map, then look again.
		r.mu.Unlock()
		sh.mu.Lock()
		if sh.records[domain] == r {
			delete(sh.records, domain)
		}
		sh.mu.Unlock()
	}
}

// createRecord returns domain's record, creating it if absent.
func (m *Manager) createRecord(sh *shard, domain string) *record {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r := sh.records[domain]; r != nil { // another goroutine created it first
		return r
	}
	r := &record{domain: domain}
	// A new domain's fences start above those of every forgotten domain, so
	// a domain that is forgotten and comes back never reuses a fence.
	floor := m.fenceFloor.Load()
	if m.replaying != nil {
		floor = m.replaying.floor(domain)
	}
	r.state.issued = Token{fence: floor, domain: m.domainSerial.Add(1), instance: m.instance}
	if m.observer != nil {
		r.events = &eventQueue{}
	}
	sh.records[domain] = r
	return r
}

// emitter returns the emitter for a call on r at now. r.mu must be held.
func (m *Manager) emitter(sh *shard, r *record, now time.Time) emitter {
	return emitter{
		domain: r.domain, now: now, stats: &sh.stats, queue: r.events,
		journal: m.journal, state: &r.state, lastSeq: &r.lastSeq,
	}
}

// finish ends a call on r: it brings the shard's expiry index up to date
// with r's lease, releases r's lock, waits until the journal holds every
// record of the domain so far (the call's own, and those its answer depends
// on), and delivers r's events. An error means the journal failed and the
// Manager is now closed; the call must return it instead of its answer.
func (m *Manager) finish(sh *shard, r *record, e *emitter) error {
	if m.policy.ttl > 0 {
		sh.expiry.sync(r)
	}
	seq := r.lastSeq
	r.mu.Unlock()
	if m.journal != nil {
		if err := m.durable(seq, e.err); err != nil {
			return err
		}
	}
	m.deliver(r)
	return nil
}

// forEachRecord calls f with each domain and its record, one shard at a time.
// It holds no lock while f runs, so f may lock the record.
func (m *Manager) forEachRecord(f func(sh *shard, domain string, r *record)) {
	type entry struct {
		domain string
		r      *record
	}
	var entries []entry
	for i := range m.shards {
		sh := &m.shards[i]
		entries = entries[:0]
		sh.mu.RLock()
		for d, r := range sh.records {
			entries = append(entries, entry{d, r})
		}
		sh.mu.RUnlock()
		for _, e := range entries {
			f(sh, e.domain, e.r)
		}
	}
}
