package worklease

import "math/bits"

// domainMap is a shard's table of records: open addressing with linear
// probing, keyed by the 64-bit hash the Manager computes once per call to
// pick the shard. Go's map would hash that hash again and probe control
// bytes first; here a lookup reads one or two slots, each holding a hash and
// a record, and compares one name. Two names with the same hash are
// vanishingly rare and need nothing special: they sit in neighbouring slots
// and the name tells them apart.
//
// The zero domainMap is empty and ready to use. It does no locking.
type domainMap struct {
	slots []domainSlot // nil, or a power of two long; a nil r marks an empty slot
	shift uint8        // 64 - log2(len(slots)): a hash's top bits pick its home slot
	count int          // records held
}

type domainSlot struct {
	hash uint64
	r    *record
}

// minDomainSlots is a table's smallest size. A table is grown when it would
// be more than 7/8 full (as full as Go's own maps get) and shrunk when it is
// at most 1/8 full, so a probe rarely runs long and memory follows the
// number of domains down as well as up.
const minDomainSlots = 8

// home returns the slot a record with hash h is placed at first. It uses the
// hash's top bits: the bottom ones picked the shard, so they are the same
// for every record in it.
func (d *domainMap) home(h uint64) int { return int(h >> d.shift) }

// get returns the record of domain, whose hash is h, or nil.
func (d *domainMap) get(h uint64, domain string) *record {
	if d.count == 0 {
		return nil
	}
	mask := len(d.slots) - 1
	for i := d.home(h); ; i = (i + 1) & mask {
		s := &d.slots[i]
		if s.r == nil {
			return nil
		}
		if s.hash == h && s.r.domain == domain {
			return s.r
		}
	}
}

// put adds r, whose domain hashes to h and has no record in d.
func (d *domainMap) put(h uint64, r *record) {
	if (d.count+1)*8 > len(d.slots)*7 {
		d.resize(max(2*len(d.slots), minDomainSlots))
	}
	d.place(domainSlot{hash: h, r: r})
	d.count++
}

// place stores s in the first empty slot from its home on. d has one.
func (d *domainMap) place(s domainSlot) {
	mask := len(d.slots) - 1
	i := d.home(s.hash)
	for d.slots[i].r != nil {
		i = (i + 1) & mask
	}
	d.slots[i] = s
}

// remove deletes r, whose domain hashes to h, if d still holds it, and
// reports whether it did.
func (d *domainMap) remove(h uint64, r *record) bool {
	if d.count == 0 {
		return false
	}
	mask := len(d.slots) - 1
	i := d.home(h)
	for d.slots[i].r != r {
		if d.slots[i].r == nil {
			return false // not here
		}
		i = (i + 1) & mask
	}
	// Close the gap rather than leave a tombstone: move back each later
	// record of the run whose home is not between the gap and it, so that
	// every record stays reachable from its home without crossing an empty
	// slot.
	for j := i; ; {
		j = (j + 1) & mask
		s := d.slots[j]
		if s.r == nil {
			break
		}
		if (j-d.home(s.hash))&mask >= (j-i)&mask {
			d.slots[i] = s
			i = j
		}
	}
	d.slots[i] = domainSlot{}
	d.count--
	switch {
	case d.count == 0:
		*d = domainMap{} // an emptied shard holds nothing
	case len(d.slots) > minDomainSlots && d.count*8 <= len(d.slots):
		d.resize(len(d.slots) / 2)
	}
	return true
}

// resize moves every record into a table of n slots, a power of two.
func (d *domainMap) resize(n int) {
	old := d.slots
	d.slots = make([]domainSlot, n)
	d.shift = uint8(64 - bits.TrailingZeros(uint(n)))
	for _, s := range old {
		if s.r != nil {
			d.place(s)
		}
	}
}

// len returns the number of records in d.
func (d *domainMap) len() int { return d.count }

// all calls f with every record in d, in no particular order. f must not
// change d.
func (d *domainMap) all(f func(*record)) {
	for _, s := range d.slots {
		if s.r != nil {
			f(s.r)
		}
	}
}

// check reports the first way d breaks its own rules, for tests: every
// record reachable from its home, the count right, the table neither
// too full nor too empty.
func (d *domainMap) check() string {
	n := 0
	mask := len(d.slots) - 1
	for i, s := range d.slots {
		if s.r == nil {
			continue
		}
		n++
		for j := d.home(s.hash); j != i; j = (j + 1) & mask {
			if d.slots[j].r == nil {
				return "a record sits beyond an empty slot from its home"
			}
		}
	}
	switch {
	case n != d.count:
		return "count is wrong"
	case d.count == 0 && d.slots != nil:
		return "an empty table holds slots"
	case d.count*8 > len(d.slots)*7:
		return "the table is more than 7/8 full"
	case len(d.slots) > minDomainSlots && d.count*8 <= len(d.slots):
		return "the table is at most 1/8 full"
	}
	return ""
}
