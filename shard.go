package worklease

import (
	"hash/maphash"
	"sync"
)

// Lock order: a shard's mu is held only to look up or insert a record in its
// map and is released before the record's mu is taken. No goroutine ever holds
// two record locks at once.

// A shard is one slice of the Manager's domain map.
type shard struct {
	mu      sync.RWMutex       // guards records
	records map[string]*record // never shrinks in this version; a record is never replaced
	_       [32]byte           // pad to a cache line so neighbouring shards' locks don't share one
}

// A record is one domain's entry in a shard. Once created it is never
// replaced (seed 000 invariant 6), so a pointer to it stays valid.
type record struct {
	mu    sync.Mutex  // guards state
	state domainState // see domainState; never locks
}

// shardFor returns the shard that holds domain.
func (m *Manager) shardFor(domain string) *shard {
	return &m.shards[maphash.String(m.seed, domain)&m.shardMask]
}

// lookup returns domain's record, or nil if it has none.
func (m *Manager) lookup(domain string) *record {
	sh := m.shardFor(domain)
	sh.mu.RLock()
	r := sh.records[domain]
	sh.mu.RUnlock()
	return r
}

// lookupOrCreate returns domain's record, creating it if absent.
func (m *Manager) lookupOrCreate(domain string) *record {
	sh := m.shardFor(domain)
	sh.mu.RLock()
	r := sh.records[domain]
	sh.mu.RUnlock()
	if r != nil {
		return r
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r = sh.records[domain]; r == nil { // another goroutine may have created it
		r = &record{}
		r.state.issued = Token{domain: m.domainSerial.Add(1), instance: m.instance}
		sh.records[domain] = r
	}
	return r
}

// forEachRecord calls f with each domain and its record, one shard at a time.
// It holds no lock while f runs, so f may lock the record.
func (m *Manager) forEachRecord(f func(domain string, r *record)) {
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
			f(e.domain, e.r)
		}
	}
}
