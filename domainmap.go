package worklease

import (
	"math/bits"
	"sync/atomic"
)

// domainMap is a shard's table of records: open addressing with linear
// probing, keyed by the 64-bit hash the Manager computes once per call to
// pick the shard. A lookup reads one or two slots, each holding a hash and
// a record, and compares one name; two names with the same hash just sit
// in neighbouring slots.
//
// Lookups take no lock. A read lock would write the shard's cache line on
// every call, and with it move the line between the cores working on
// different domains of the shard. Instead a lookup loads the table and its
// slots atomically, and changes, made one at a time under the shard's mu,
// never mislead it:
//
//   - a slot goes from empty to a record, from a record to a tombstone
//     (removed), and from a tombstone to a record: never back to empty, so
//     a probe never stops short of a record that was there when it began;
//   - a resize builds a new table and publishes it whole: a lookup still on
//     the old one sees the records as they were before.
//
// A lookup may thus return a record that is being removed. Forget marks a
// record dropped before removing it, and lockRecord checks for that under
// the record's lock.
//
// The zero domainMap is empty and ready to use.
type domainMap struct {
	table atomic.Pointer[domainTable] // nil while the map is empty

	// Guarded by the shard's mu.
	count      int // records held
	tombstones int // slots of removed records, not yet reused
}

// A domainTable is a domainMap's slots. Only its slots' contents change
// once it is published.
type domainTable struct {
	slots []domainSlot // a power of two long
	shift uint8        // 64 - log2(len(slots)): a hash's top bits pick its home slot
}

// A domainSlot holds a record and its domain's hash. The hash is stored
// before the record, so a lookup that loads a record finds its hash, or,
// if the slot was emptied and filled again meanwhile, a newer record's:
// the name comparison then turns the old record down, which was removed.
type domainSlot struct {
	hash atomic.Uint64
	r    atomic.Pointer[domainRecord] // nil: empty; tombstone: removed
}

// tombstone fills the slot of a removed record.
var tombstone = new(domainRecord)

// minDomainSlots is a table's smallest size. A table is rebuilt when its
// records and tombstones would fill more than 7/8 of it (as full as Go's
// own maps get), or its records fill at most 1/8; the new one is at most
// half full. A probe thus rarely runs long, and memory follows the number
// of domains down as well as up.
const minDomainSlots = 8

// home returns the slot a record with hash h is placed at first. It uses the
// hash's top bits: the bottom ones picked the shard, so they are the same
// for every record in it.
func (t *domainTable) home(h uint64) int { return int(h >> (t.shift & 63)) } // shift < 64: the mask spares a check

// get returns the record of domain, whose hash is h, or nil. It may return
// a record that Forget dropped.
func (d *domainMap) get(h uint64, domain string) *domainRecord {
	t := d.table.Load()
	if t == nil {
		return nil
	}
	n := len(domain)
	if n < 8 || n > 16 {
		return t.find(h, domain)
	}
	// Keys of 8 to 16 bytes, as most are, compare in two loads each,
	// written out here: a comparison of strings calls the runtime, and a
	// call in the loop would have the probe keep its state on the stack
	// (the stores and loads, the call and the comparison's own checks cost
	// more than the rest of a lookup).
	slots := t.slots
	mask := len(slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &slots[i]
		r := s.r.Load()
		if r == nil {
			return nil
		}
		// The record's key is read only once the hashes match: a probe
		// that passes other records' slots must not fetch their lines.
		if s.hash.Load() != h || r == tombstone {
			continue
		}
		if k := r.domain; len(k) == n && load64(k, 0) == load64(domain, 0) && load64(k, n-8) == load64(domain, n-8) {
			return r
		}
	}
}

// find is get in t, for a domain of any length.
func (t *domainTable) find(h uint64, domain string) *domainRecord {
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		r := s.r.Load()
		if r == nil {
			return nil
		}
		if r != tombstone && s.hash.Load() == h && r.domain == domain {
			return r
		}
	}
}

// put adds r, whose domain hashes to h and has no record in d. The shard's
// mu must be held.
func (d *domainMap) put(h uint64, r *domainRecord) {
	t := d.table.Load()
	if t == nil || (d.count+d.tombstones+1)*8 > len(t.slots)*7 {
		t = d.rebuild(d.count + 1)
	}
	mask := len(t.slots) - 1
	i := t.home(h)
	for {
		cur := t.slots[i].r.Load()
		if cur == nil {
			break
		}
		if cur == tombstone {
			d.tombstones--
			break
		}
		i = (i + 1) & mask
	}
	t.slots[i].hash.Store(h)
	t.slots[i].r.Store(r)
	d.count++
}

// remove deletes r, whose domain hashes to h, if d still holds it, and
// reports whether it did. The shard's mu must be held.
func (d *domainMap) remove(h uint64, r *domainRecord) bool {
	t := d.table.Load()
	if t == nil {
		return false
	}
	mask := len(t.slots) - 1
	i := t.home(h)
	for {
		cur := t.slots[i].r.Load()
		if cur == nil {
			return false // not here
		}
		if cur == r {
			break
		}
		i = (i + 1) & mask
	}
	t.slots[i].r.Store(tombstone)
	d.count--
	d.tombstones++
	switch {
	case d.count == 0:
		d.table.Store(nil) // an emptied shard holds nothing
		d.tombstones = 0
	case len(t.slots) > minDomainSlots && d.count*8 <= len(t.slots):
		d.rebuild(d.count)
	}
	return true
}

// rebuild publishes a new table, at most half full with n records, holding
// d's records and no tombstones, and returns it. The shard's mu must be held.
func (d *domainMap) rebuild(n int) *domainTable {
	size := max(minDomainSlots, 1<<bits.Len(uint(2*n-1)))
	t := &domainTable{slots: make([]domainSlot, size), shift: uint8(64 - bits.TrailingZeros(uint(size)))}
	mask := size - 1
	d.all(func(h uint64, r *domainRecord) {
		i := t.home(h)
		for t.slots[i].r.Load() != nil {
			i = (i + 1) & mask
		}
		t.slots[i].hash.Store(h)
		t.slots[i].r.Store(r)
	})
	d.table.Store(t)
	d.tombstones = 0
	return t
}

// all calls f with the hash and record of every record in d, in no
// particular order. The shard's mu must be held, and f must not change d.
func (d *domainMap) all(f func(h uint64, r *domainRecord)) {
	t := d.table.Load()
	if t == nil {
		return
	}
	for i := range t.slots {
		s := &t.slots[i]
		if r := s.r.Load(); r != nil && r != tombstone {
			f(s.hash.Load(), r)
		}
	}
}

// check reports the first way d breaks its own rules, for tests: every
// record reachable from its home, the counts right, the table neither too
// full nor too empty. The shard's mu must be held.
func (d *domainMap) check() string {
	t := d.table.Load()
	if t == nil {
		if d.count != 0 || d.tombstones != 0 {
			return "counts without a table"
		}
		return ""
	}
	records, tombstones := 0, 0
	mask := len(t.slots) - 1
	for i := range t.slots {
		r := t.slots[i].r.Load()
		switch r {
		case nil:
			continue
		case tombstone:
			tombstones++
			continue
		}
		records++
		for j := t.home(t.slots[i].hash.Load()); j != i; j = (j + 1) & mask {
			if t.slots[j].r.Load() == nil {
				return "a record sits beyond an empty slot from its home"
			}
		}
	}
	switch {
	case records != d.count || tombstones != d.tombstones:
		return "counts are wrong"
	case d.count == 0:
		return "an empty map holds a table"
	case (d.count+d.tombstones)*8 > len(t.slots)*7:
		return "the table is more than 7/8 full"
	case len(t.slots) > minDomainSlots && d.count*8 <= len(t.slots):
		return "the table is at most 1/8 full"
	}
	return ""
}
