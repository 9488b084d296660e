package worklease

import "slices"

// offsetSet is a set of non-negative offsets kept as sorted, disjoint,
// non-adjacent closed intervals. It costs memory in proportion to the holes
// between its members, not to how many there are: a million offsets added in
// order are one interval. Adding the offset just past the last interval, the
// common case for in-order work, is O(1); any other add or remove is a binary
// search plus, at worst, one copy of the intervals after it.
//
// The zero offsetSet is empty and allocates nothing.
type offsetSet struct {
	runs []offsetRun // sorted by lo; runs[i].hi+1 < runs[i+1].lo
	n    int64       // number of offsets in the set
}

// offsetRun is the closed interval [lo, hi].
type offsetRun struct{ lo, hi int64 }

// len returns the number of offsets in the set.
func (s *offsetSet) len() int64 { return s.n }

// search returns the index of the first run whose lo is greater than x.
func (s *offsetSet) search(x int64) int {
	lo, hi := 0, len(s.runs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.runs[mid].lo <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// contains reports whether x is in the set.
func (s *offsetSet) contains(x int64) bool {
	n := len(s.runs)
	if n == 0 {
		return false
	}
	if last := s.runs[n-1]; x >= last.lo { // fast path: at or after the last run
		return x <= last.hi
	}
	i := s.search(x)
	return i > 0 && x <= s.runs[i-1].hi
}

// add inserts x, which must be non-negative, and reports whether it was absent.
func (s *offsetSet) add(x int64) bool {
	n := len(s.runs)
	// Fast path: x extends the last run or starts a new one after it.
	// The comparisons are written as x-1 so that hi+1 never overflows.
	if n > 0 {
		last := &s.runs[n-1]
		if x-1 == last.hi {
			last.hi = x
			s.n++
			return true
		}
		if x-1 > last.hi {
			s.runs = append(s.runs, offsetRun{x, x})
			s.n++
			return true
		}
	}
	i := s.search(x)
	if i > 0 && x <= s.runs[i-1].hi {
		return false
	}
	joinsPrev := i > 0 && s.runs[i-1].hi == x-1
	joinsNext := i < n && s.runs[i].lo-1 == x
	switch {
	case joinsPrev && joinsNext:
		s.runs[i-1].hi = s.runs[i].hi
		s.runs = slices.Delete(s.runs, i, i+1)
	case joinsPrev:
		s.runs[i-1].hi = x
	case joinsNext:
		s.runs[i].lo = x
	default:
		s.runs = slices.Insert(s.runs, i, offsetRun{x, x})
	}
	s.n++
	return true
}

// remove deletes x and reports whether it was present.
func (s *offsetSet) remove(x int64) bool {
	i := s.search(x) - 1
	if i < 0 || x > s.runs[i].hi {
		return false
	}
	r := s.runs[i]
	switch {
	case r.lo == r.hi:
		s.runs = slices.Delete(s.runs, i, i+1)
	case x == r.lo:
		s.runs[i].lo = x + 1
	case x == r.hi:
		s.runs[i].hi = x - 1
	default: // split [lo, hi] into [lo, x-1] and [x+1, hi]
		s.runs[i].hi = x - 1
		s.runs = slices.Insert(s.runs, i+1, offsetRun{x + 1, r.hi})
	}
	s.n--
	if len(s.runs) == 0 {
		s.runs = nil
	}
	return true
}

// raiseTo makes the set the single run [0, hw], where hw is the larger of x
// (non-negative) and the set's largest member: the whole representation of
// a processed set under WithMonotonicOffsets, which covers every offset up to
// the domain's highest terminal one whatever the holes below. Any runs the
// set held before are absorbed. Raising the run is O(1) and allocates only
// for the first run.
//
// A run of every non-negative offset, [0, math.MaxInt64], holds 2^63
// offsets, one more than an int64 counts: len then wraps to a negative
// number. Callers that report a monotonic set's size compute it from the
// run, not from len.
func (s *offsetSet) raiseTo(x int64) {
	n := len(s.runs)
	if n > 0 {
		x = max(x, s.runs[n-1].hi)
	}
	if n != 1 || cap(s.runs) != 1 { // keep no spare capacity from runs absorbed
		s.runs = make([]offsetRun, 1)
	}
	s.runs[0] = offsetRun{0, x}
	s.n = x + 1 // wraps for x == math.MaxInt64; check counts the same way
}

// all calls yield for each offset in ascending order until yield returns false.
func (s *offsetSet) all(yield func(int64) bool) {
	for _, r := range s.runs {
		for x := r.lo; ; x++ {
			if !yield(x) {
				return
			}
			if x == r.hi {
				break
			}
		}
	}
}
