package worklease

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// expiryIndex is a min-heap of a shard's leases that have an expiry, keyed by
// it, so that Reap finds the expired leases without scanning every domain.
// A record is in it at most once, at the position its heapIdx names.
type expiryIndex struct {
	mu   sync.Mutex // guards heap and the heapIdx of every record in it
	heap []expiryEntry
	// soonest is the expiry at the top of heap, zero when it is empty
	// (no expiry is the zero instant), so that Claim skips the shards
	// with no lease due without taking their lock. Written under mu.
	soonest atomic.Int64
}

type expiryEntry struct {
	at instant // the lease's expiry
	r  *domainRecord
}

// sync makes the index hold r's current lease expiry, or nothing for r if
// its lease has none. r.mu must be held.
func (x *expiryIndex) sync(r *domainRecord) {
	var want instant
	if r.state.leased {
		want = r.state.lease.expiresAt
	}
	if want == r.expiresAt {
		return
	}
	x.mu.Lock()
	switch {
	case want == 0:
		if r.heapIdx != 0 {
			x.remove(int(r.heapIdx - 1))
		}
	case r.heapIdx == 0:
		x.push(expiryEntry{at: want, r: r})
	default:
		i := int(r.heapIdx - 1)
		x.heap[i].at = want
		x.fix(i)
	}
	x.noteSoonest()
	x.mu.Unlock()
	r.expiresAt = want
}

// noteSoonest makes soonest the heap's top. x.mu must be held.
func (x *expiryIndex) noteSoonest() {
	var top instant
	if len(x.heap) > 0 {
		top = x.heap[0].at
	}
	if instant(x.soonest.Load()) != top { // most changes leave the top alone
		x.soonest.Store(int64(top))
	}
}

// dueBy reports whether a lease in the index may be due at now.
func (x *expiryIndex) dueBy(now instant) bool {
	at := instant(x.soonest.Load())
	return at != 0 && at <= now
}

// putBack puts r, which popDue took out of the index, back in, as it was.
func (x *expiryIndex) putBack(r *domainRecord) {
	r.mu.Lock()
	r.expiresAt = 0 // not in the index: sync puts it back
	x.sync(r)
	r.mu.Unlock()
}

// popDue removes and returns the entries due at or before now.
func (x *expiryIndex) popDue(now instant, dst []expiryEntry) []expiryEntry {
	x.mu.Lock()
	for len(x.heap) > 0 && x.heap[0].at <= now {
		dst = append(dst, x.heap[0])
		x.remove(0)
	}
	x.noteSoonest()
	x.mu.Unlock()
	return dst
}

func (x *expiryIndex) push(e expiryEntry) {
	x.heap = append(x.heap, e)
	i := len(x.heap) - 1
	e.r.heapIdx = int32(i + 1)
	x.up(i)
}

func (x *expiryIndex) remove(i int) {
	last := len(x.heap) - 1
	if i != last {
		x.swap(i, last)
	}
	x.heap[last].r.heapIdx = 0 // after the swap, which renumbers the removed entry
	x.heap[last] = expiryEntry{}
	x.heap = x.heap[:last]
	if i != last {
		x.fix(i)
	}
	if len(x.heap) == 0 {
		x.heap = nil
	}
}

func (x *expiryIndex) fix(i int) {
	if !x.down(i) {
		x.up(i)
	}
}

func (x *expiryIndex) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if x.heap[parent].at <= x.heap[i].at {
			return
		}
		x.swap(i, parent)
		i = parent
	}
}

// down sifts i toward the leaves and reports whether it moved.
func (x *expiryIndex) down(i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(x.heap) {
			break
		}
		if right := child + 1; right < len(x.heap) && x.heap[right].at < x.heap[child].at {
			child = right
		}
		if x.heap[i].at <= x.heap[child].at {
			break
		}
		x.swap(i, child)
		i = child
	}
	return i > start
}

func (x *expiryIndex) swap(i, j int) {
	x.heap[i], x.heap[j] = x.heap[j], x.heap[i]
	x.heap[i].r.heapIdx = int32(i + 1)
	x.heap[j].r.heapIdx = int32(j + 1)
}

// Reap revokes every lease whose time has run out and returns them, ordered
// by domain, so that the orchestrator can re-drive their domains. Expired
// leases are also revoked lazily whenever their domain is next touched, so
// Reap is needed only to notice workers that died, so that the work they
// held runs again: run it from a reaper loop. Reap looks only at
// leases that are due, never at every domain. Without WithLeaseTTL it
// returns nothing, except for leases restored from a journal written with a
// TTL, which keep their expiry (see WithLeaseTTL).
//
// Reap leaves alone the lease of a domain that no call accepts (see
// MaxDomainLen), which only a journal written before domains were bounded
// can hold.
func (m *Manager) Reap() ([]Expiry, error) {
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	if !m.expiring {
		return nil, nil // no lease has an expiry
	}
	now := m.now()
	var out []Expiry
	var due []expiryEntry
	// The batch delivers events only once every due lease is handled: an
	// observer that panics must not leave leases out of the index.
	var b batch
	for i := range m.shards {
		sh := &m.shards[i]
		due = sh.expiry.popDue(now, due[:0])
		for _, d := range due {
			if exp, ok := m.reapOne(sh, d.r, now, &b); ok {
				out = append(out, exp)
			}
		}
	}
	if err := m.endBatch(&b); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Expiry) int { return strings.Compare(a.Domain, b.Domain) })
	return out, nil
}

// reapOne expires r's lease if it is due, in b, and reports it if it did.
// r was just taken out of the expiry index, which the Manager keeps
// (Manager.expiring): the step's end puts r's lease back if it is still
// leased, and a requeued offset makes its domain ready.
func (m *Manager) reapOne(sh *shard, r *domainRecord, now instant, b *batch) (exp Expiry, ok bool) {
	r.mu.Lock()
	r.expiresAt = 0 // no longer in the index
	if r.dropped {
		r.mu.Unlock()
		return Expiry{}, false
	}
	if !validDomain(r.domain) {
		// A domain no call accepts, from a journal written before domains
		// were bounded: its records could be more than the journal takes.
		// Its lease stays as it is, like everything else of it.
		sh.expiry.sync(r)
		r.mu.Unlock()
		return Expiry{}, false
	}
	s := &r.state
	l, attempts := s.lease, s.attempts()
	var tok Token
	if s.leased {
		tok = s.leaseToken(&m.policy)
	}
	st := step{now: now, kept: m.stepBuffer()}
	if ok = s.expireIfDue(&m.policy, &st); ok {
		exp = Expiry{
			Domain:       r.domain,
			Offset:       l.offset,
			Token:        tok,
			Attempts:     attempts,
			DeadLettered: s.isFailed(l.offset),
		}
		exp.Next, exp.HasNext = s.next(now)
	}
	m.finish(sh, r, &st, b)
	return exp, ok
}
