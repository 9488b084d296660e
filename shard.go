package worklease

import (
	"strings"
	"sync"
	"unsafe"
)

// Lock order: record.mu, then shard.mu (to change the shard's set of
// records with dead letters), shard.expiry.mu or the ready queue's mu (see
// ready.go for the pull calls'). A shard's mu is held only to change its
// map or its dead set or to read one whole, and never while taking another
// lock; looking a record up takes no lock. No goroutine ever holds two
// record locks at once.

// A shard is one slice of the Manager's domain map, with the expiry index
// and event counters of its domains.
type shard struct {
	mu      sync.Mutex // serializes changes to records and guards its counts; lookups take no lock (see domainMap)
	records domainMap  // a record is replaced only after Forget dropped it

	expiry expiryIndex // leases with an expiry, soonest first; empty unless Manager.expiring
	stats  counters    // see counters; the busiest kinds are counted in the records
	// dead holds the shard's records that have dead letters, each with
	// its latest failure's time, for the listings that read only those;
	// guarded by mu (see syncDead).
	dead map[*domainRecord]instant

	// The padding rounds a shard up to a multiple of two cache lines (CPUs
	// fetch lines in pairs), so that goroutines working in neighbouring
	// shards do not contend for the same lines. TestShardSize keeps it
	// right.
	_ [32]byte
}

// shardAlign is what a shard's size is a multiple of: two 64-byte lines.
const shardAlign = 128

// A domainRecord is one domain's entry in a shard (not to be confused with
// a journal's Record of one transition). Once created it is never
// replaced unless Forget drops it, so a pointer to it stays valid and the
// lock that orders a domain's calls stays the same.
//
// A domain record is laid out for the cache: it is recordSize bytes, a size class
// whose objects start on a 64-byte line, and everything a TryAcquire+Succeed
// cycle reads or writes sits in its first two lines (CPUs fetch lines in
// pairs): the key's header, the lock, the counts, the flags, the lease, the
// fence, the backlog and cold pointers and the highest processed run. The
// third line holds what only some cycles touch: the pointer to the processed
// set's lower runs, the journal's sequence number, the pointer to the extra
// part (the observer's queue, the counts' overflows), the expiry index's
// fields, and the key itself when it is short. TestRecordLayout keeps it so.
type domainRecord struct {
	domain string // immutable

	mu sync.Mutex // guards everything below, except heapIdx
	// counts are the domain's events of the busiest kinds, modulo 2^32;
	// extra's wraps count their overflows. See recordCounts.
	counts  recordCounts
	dropped bool        // Forget removed the domain: look it up again
	listed  bool        // the Manager's ready queue lists the domain; see readyQueue.sync
	held    bool        // the queue listed it from a time its state held it back until; see readyQueue.sync
	dead    bool        // the shard's dead set holds the record; see syncDead
	state   domainState // see domainState; never locks

	lastSeq uint64       // the journal sequence number of the domain's latest record; 0 without a journal
	extra   *recordExtra // nil without an observer until a count wraps
	// expiresAt is the lease expiry the shard's expiry index holds for this
	// record (zero: none). heapIdx is its position there plus one (zero:
	// absent); unlike the rest, it is guarded by the shard's expiry.mu. A
	// shard's index holds far fewer than 2^31 leases: a record each.
	expiresAt instant
	heapIdx   int32
	// key holds the domain's bytes when they fit, and domain then points
	// into it, so that comparing a key with the domain's reads a line of
	// the record itself, which the lookup reached anyway, rather than a
	// separate allocation that would be one more memory access after it.
	// It fills the record's third line; longer keys are copied apart, and
	// so are all keys of a journaled Manager: its write-behind goroutine
	// reads a record's key on another core while the caller writes
	// lastSeq, in the same line, on every call.
	key [inlineKeyLen]byte
}

// inlineKeyLen is the longest key a record holds in itself: what the third
// line has left. TestRecordLayout keeps the record within recordSize.
const inlineKeyLen = 28

// recordExtra is what only some records need: the observer's queue of
// events, and how many times each of the record's counts wrapped around.
// It is allocated with the record when the Manager has an observer, and
// otherwise by a count's first wrap, after four billion events of a kind.
// Its fields are guarded by the record's mu.
type recordExtra struct {
	events *eventQueue  // the domain's, with an observer; see deliver
	wraps  recordCounts // how many times each of counts wrapped around
}

// recordSize is the size class a record must fit: 192 bytes, three cache
// lines. The runtime's objects of that class start on a line.
const recordSize = 192

// recordHotBytes is how much of a record a cycle touches: its first two
// cache lines.
const recordHotBytes = 128

// hash returns domain's hash, which picks its shard and keys its record
// there.
func (m *Manager) hash(domain string) uint64 { return m.seed.sum(domain) }

// shardOf returns the shard that holds the domain whose hash is h.
func (m *Manager) shardOf(h uint64) *shard { return &m.shards[h&m.shardMask] }

// lockRecord returns domain's shard and record, with the record locked,
// for the Manager's own use (replay, restoring a snapshot, a single
// domain's dead letters): the lookup of a call (see enter) without its
// checks and its clock. If the domain has no record, lockRecord creates
// one when create is set and otherwise returns a nil record.
func (m *Manager) lockRecord(domain string, create bool) (*shard, *domainRecord) {
	c := &lookUp
	if create {
		c = &lookUpCreate
	}
	sh, r, _, _ := m.enter(c, domain, 0)
	return sh, r
}

// absent returns what a call answers for a domain it found no record of:
// err, which may be nil, unless the journal failed, for instance waiting for
// the Forget that dropped the domain's record (see lockRecord); the call
// returns why then, as the Manager is closed.
func (m *Manager) absent(err error) error {
	if f := m.failure.Load(); f != nil {
		return *f
	}
	return err
}

// unlink removes r, which Forget dropped, from its shard's map if it is
// still there.
func (m *Manager) unlink(r *domainRecord) {
	h := m.hash(r.domain)
	sh := m.shardOf(h)
	sh.mu.Lock()
	if sh.records.remove(h, r) {
		sh.retire(r)
	}
	sh.mu.Unlock()
}

// unlinkDrained unlinks r, which Forget dropped, once an observer has been
// told all of r's events. Until then r stays in the map, so that a record
// made for its domain takes its queue over and its events follow r's (see
// createRecord); whoever delivers the last of them unlinks r (see deliver).
func (m *Manager) unlinkDrained(r *domainRecord) {
	if r.extra == nil || r.extra.events.drained() {
		m.unlink(r)
	}
}

// createRecord returns the record of domain, whose hash is h, creating it if
// absent. If the map still holds dropped, a record Forget dropped, the new
// record takes its place and its queue of events.
func (m *Manager) createRecord(sh *shard, h uint64, domain string, dropped *domainRecord) *domainRecord {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var queue *eventQueue
	switch r := sh.records.get(h, domain); {
	case r == nil:
	case r != dropped: // another goroutine created it first
		return r
	default:
		sh.records.remove(h, r)
		sh.retire(r)
		if r.extra != nil {
			queue = r.extra.events
		}
	}
	// The record keeps a copy of the key: the caller's may share memory
	// with a much larger buffer, such as the message it came in.
	r := &domainRecord{}
	if m.journal == nil && len(domain) <= inlineKeyLen {
		n := copy(r.key[:], domain)
		r.domain = unsafe.String(&r.key[0], n) // r.key never changes after this
	} else {
		r.domain = strings.Clone(domain)
	}
	// A new domain's fences start above those of every forgotten domain, so
	// a domain that is forgotten and comes back never reuses a fence.
	floor := m.fenceFloor.Load()
	if m.replaying != nil {
		floor = m.replaying.floor(domain)
	}
	r.state.issued = issued{fence: floor, serial: m.domainSerial.Add(1)}
	if m.observer != nil {
		if queue == nil {
			queue = new(eventQueue)
		}
		r.extra = &recordExtra{events: queue}
	}
	sh.records.put(h, r)
	return r
}

// raiseFenceFloor makes new domains' fences start above fence.
func (m *Manager) raiseFenceFloor(fence uint64) {
	for {
		cur := m.fenceFloor.Load()
		if fence <= cur || m.fenceFloor.CompareAndSwap(cur, fence) {
			return
		}
	}
}

// forEachRecord calls f with each domain and its record, one shard at a time.
// It holds no lock while f runs, so f may lock the record.
func (m *Manager) forEachRecord(f func(sh *shard, domain string, r *domainRecord)) {
	type entry struct {
		domain string
		r      *domainRecord
	}
	var entries []entry
	for i := range m.shards {
		sh := &m.shards[i]
		entries = entries[:0]
		sh.mu.Lock()
		sh.records.all(func(_ uint64, r *domainRecord) {
			entries = append(entries, entry{r.domain, r})
		})
		sh.mu.Unlock()
		for _, e := range entries {
			f(sh, e.domain, e.r)
		}
	}
}

// syncDead brings sh's set of records with dead letters up to date with r,
// a record of sh locked by the caller, after a step that made or ended one
// of r's dead letters: a record is in the set, with the time of its latest
// failure, while it has dead letters and is not dropped.
func (sh *shard) syncDead(r *domainRecord) {
	d := r.state.failed()
	has := !r.dropped && d.len() > 0
	if !has && !r.dead {
		return
	}
	r.dead = has
	sh.mu.Lock()
	if has {
		if sh.dead == nil {
			sh.dead = make(map[*domainRecord]instant)
		}
		sh.dead[r] = d.byTime[len(d.byTime)-1].at
	} else {
		delete(sh.dead, r)
	}
	sh.mu.Unlock()
}

// A deadRecord is a record of the shard's dead set, with the time of its
// latest failure as the set knew it.
type deadRecord struct {
	r      *domainRecord
	latest instant
}

// syncAllDead brings every shard's set of records with dead letters up to
// date, as after a replay.
func (m *Manager) syncAllDead() {
	m.forEachRecord(func(sh *shard, _ string, r *domainRecord) {
		r.mu.Lock()
		if r.state.failed().len() > 0 || r.dead {
			sh.syncDead(r)
		}
		r.mu.Unlock()
	})
}
