package worker

// A keySet is a set of the queue's keys, each a nonzero hash: open
// addressing with linear probing, and deletion by shifting back the keys
// that probed past the one deleted. A queue adds every key once and deletes
// it once, so a map, which leaves a tombstone for most deletions until it
// next grows, ends up probing long runs of them on every lookup
// (BenchmarkPoolThroughput spent a tenth of its CPU there); the set keeps
// no tombstones, and a lookup reads one cache line or two. It does no
// locking.
type keySet struct {
	slots []uint64 // 0 for none; a power of two long, and at least twice n
	n     int      // keys held
}

// minKeySlots is the size of a keySet's first table.
const minKeySlots = 16

// home returns k's first slot to probe. The queue picks a shard by k's
// top bits, the same for all of a set's keys: mix them all down.
func (s *keySet) home(k uint64) int {
	return int((k * 0xff51afd7ed558ccd) >> 32 & uint64(len(s.slots)-1))
}

// find returns the slot that holds k, or the empty slot that ends its
// probe; s.slots must not be empty.
func (s *keySet) find(k uint64) int {
	mask := len(s.slots) - 1
	i := s.home(k)
	for s.slots[i] != k && s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

// has reports whether k is in s.
func (s *keySet) has(k uint64) bool {
	return len(s.slots) != 0 && s.slots[s.find(k)] == k
}

// add adds k, and reports whether it was not in s already. k must not be
// 0.
func (s *keySet) add(k uint64) bool {
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	i := s.find(k)
	if s.slots[i] == k {
		return false
	}
	s.slots[i] = k
	s.n++
	return true
}

// remove removes k, and reports whether it was in s.
func (s *keySet) remove(k uint64) bool {
	if len(s.slots) == 0 {
		return false
	}
	i := s.find(k)
	if s.slots[i] != k {
		return false
	}
	// Each key after i in the run that probed past i moves back into the
	// hole, which moves on to where it was; the hole left last ends the
	// run.
	mask := len(s.slots) - 1
	for j := (i + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		if h := s.home(s.slots[j]); (j-h)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = 0
	s.n--
	return true
}

// grow doubles s's table, or makes its first.
func (s *keySet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(2*len(old), minKeySlots))
	for _, k := range old {
		if k != 0 {
			s.slots[s.find(k)] = k
		}
	}
}
