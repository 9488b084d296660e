package worklease

import "slices"

// offsetSet is a set of non-negative offsets kept as sorted, disjoint,
// non-adjacent closed intervals. It costs memory in proportion to the holes
// between its members, not to how many there are: a million offsets added in
// order are one interval. Adding the offset just past the last interval, the
// common case for in-order work, is O(1); any other add is a binary search
// plus, at worst, one copy of the intervals after it.
//
// The highest interval is held in the set itself, where in-order work finds
// it without following a pointer to the others: a domain's cycle reads and
// extends it in the cache lines of the domain's record. The set keeps no
// count of its members, which would be one more word for every cycle to
// write: len adds up the runs.
//
// The zero offsetSet is empty and allocates nothing.
type offsetSet struct {
	// The highest run is [lo, end-1]. end is one past its last offset, as
	// a uint64 so that it does not overflow when that is math.MaxInt64; an
	// end of zero means the set is empty (no run ends before offset 0).
	lo  int64
	end uint64
	// earlier points to the runs below the highest, sorted by lo, each
	// hi+1 < the next lo; nil if there are none. A pointer, not a slice,
	// as most sets never have any: it takes a third of a slice's room in
	// the record.
	earlier *[]offsetRun
}

// offsetRun is the closed interval [lo, hi].
type offsetRun struct{ lo, hi int64 }

// below returns the runs below the highest.
func (s *offsetSet) below() []offsetRun {
	if s.earlier == nil {
		return nil
	}
	return *s.earlier
}

// setBelow makes runs the runs below the highest.
func (s *offsetSet) setBelow(runs []offsetRun) {
	switch {
	case len(runs) == 0:
		s.earlier = nil
	case s.earlier != nil:
		*s.earlier = runs
	default:
		s.earlier = &runs
	}
}

// isEmpty reports whether the set has no members.
func (s *offsetSet) isEmpty() bool { return s.end == 0 }

// last returns the highest run; the set must not be empty.
func (s *offsetSet) last() offsetRun { return offsetRun{s.lo, int64(s.end - 1)} }

// setLast makes r the highest run.
func (s *offsetSet) setLast(r offsetRun) { s.lo, s.end = r.lo, uint64(r.hi)+1 }

// len returns the number of offsets in the set. It adds up the runs, so it
// costs in proportion to their number. The run of every non-negative
// offset, [0, math.MaxInt64], holds 2^63 offsets, one more than an int64
// counts: len then wraps to a negative number (see raiseTo).
func (s *offsetSet) len() int64 {
	if s.end == 0 {
		return 0
	}
	n := int64(s.end - uint64(s.lo))
	for _, r := range s.below() {
		n += r.hi - r.lo + 1
	}
	return n
}

// numRuns returns the number of runs.
func (s *offsetSet) numRuns() int {
	if s.end == 0 {
		return 0
	}
	return len(s.below()) + 1
}

// runs returns the runs in ascending order in a new slice, nil if there are
// none.
func (s *offsetSet) runs() []offsetRun {
	if s.end == 0 {
		return nil
	}
	return append(slices.Clone(s.below()), s.last())
}

// setRuns makes runs, sorted, disjoint and non-adjacent, the set's runs. It
// takes runs over, and leaves no spare capacity in them.
func (s *offsetSet) setRuns(runs []offsetRun) {
	*s = offsetSet{}
	if len(runs) == 0 {
		return
	}
	s.setLast(runs[len(runs)-1])
	s.setBelow(slices.Clip(runs[:len(runs)-1]))
}

// search returns the index of the first of runs whose lo is greater than x.
func search(runs []offsetRun, x int64) int {
	lo, hi := 0, len(runs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if runs[mid].lo <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// contains reports whether x is in the set.
func (s *offsetSet) contains(x int64) bool {
	if x >= s.lo { // at or after the last run (an empty set's end is 0)
		return uint64(x) < s.end
	}
	return s.containsBelow(x)
}

// pastEnd reports whether x is past the highest run, and so not in the
// set, as the next offset of in-order work is: in one comparison, the
// answer of contains for such an x. (As unsigned, a negative x is past
// it too, and no member is negative.)
func (s *offsetSet) pastEnd(x int64) bool { return uint64(x) >= s.end }

// containsBelow is contains of x below the last run. Kept apart, so that
// contains is small enough to inline.
func (s *offsetSet) containsBelow(x int64) bool {
	if s.end == 0 {
		return false
	}
	below := s.below()
	i := search(below, x)
	return i > 0 && x <= below[i-1].hi
}

// add inserts x, which must be non-negative, and reports whether it was absent.
func (s *offsetSet) add(x int64) bool {
	if uint64(x) == s.end && s.end != 0 { // x extends the last run: most adds
		s.end++
		return true
	}
	return s.addSlow(x)
}

// addSlow is add of an x that does not extend the last run. Kept apart, so
// that add is small enough to inline.
func (s *offsetSet) addSlow(x int64) bool {
	// Fast path: x starts a new run after the last, or the first.
	switch {
	case s.end == 0:
		s.lo, s.end = x, uint64(x)+1
		return true
	case uint64(x) == s.end:
		s.end++
		return true
	case uint64(x) > s.end:
		s.setBelow(append(s.below(), s.last()))
		s.lo, s.end = x, uint64(x)+1
		return true
	}
	runs := append(s.below(), s.last()) // the slow path works on every run
	n := len(runs)
	i := search(runs, x)
	if i > 0 && x <= runs[i-1].hi {
		return false
	}
	joinsPrev := i > 0 && runs[i-1].hi == x-1
	joinsNext := i < n && runs[i].lo-1 == x
	switch {
	case joinsPrev && joinsNext:
		runs[i-1].hi = runs[i].hi
		runs = slices.Delete(runs, i, i+1)
	case joinsPrev:
		runs[i-1].hi = x
	case joinsNext:
		runs[i].lo = x
	default:
		runs = slices.Insert(runs, i, offsetRun{x, x})
	}
	s.split(runs)
	return true
}

// split makes runs, which holds at least one run and shares its array with
// the runs below the highest, the set's runs.
func (s *offsetSet) split(runs []offsetRun) {
	s.setLast(runs[len(runs)-1])
	s.setBelow(runs[:len(runs)-1])
}

// raiseTo makes the set the single run [0, hw], where hw is the larger of x
// (non-negative) and the set's largest member: the whole representation of
// a processed set under WithMonotonicOffsets, which covers every offset up to
// the domain's highest terminal one whatever the holes below. Any runs the
// set held before are absorbed. It never allocates.
//
// A run of every non-negative offset, [0, math.MaxInt64], holds 2^63
// offsets, one more than an int64 counts: len then wraps to a negative
// number. Callers that report a monotonic set's size compute it from the
// run, not from len.
func (s *offsetSet) raiseTo(x int64) {
	if s.end != 0 {
		x = max(x, int64(s.end-1))
	}
	s.lo, s.end, s.earlier = 0, uint64(x)+1, nil
}
