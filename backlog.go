package worklease

import (
	"errors"
	"fmt"
)

// backlog is one domain's queue of offsets waiting behind the current lease:
// a ring-buffer deque that never holds an offset twice.
//
// Offsets usually arrive in increasing order, and then the ring is sorted:
// an offset above the back is new without looking further, and membership
// is a binary search, so a push costs about what a slice append does. Once
// an offset arrives out of order, the backlog is unordered until it empties:
// while it holds at most smallBacklog offsets membership is a scan of the
// ring, and past that a map indexes every member.
//
// The zero backlog is empty and allocates nothing. A nil *backlog is empty
// too: every method but the pushes works on it.
type backlog struct {
	buf       []int64            // ring; len(buf) is zero or a power of two
	head      int                // index in buf of the front
	n         int                // number of offsets held
	unordered bool               // the ring may not be sorted ascending from front to back
	index     map[int64]struct{} // members when non-nil: unordered, and n exceeded smallBacklog
}

const (
	smallBacklog   = 8  // largest backlog that is scanned rather than indexed
	keepBacklogCap = 64 // an emptied backlog keeps a buffer up to this size for reuse
)

// len returns the number of offsets in the backlog.
func (b *backlog) len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// at returns the i-th offset from the front; i must be in [0, len).
func (b *backlog) at(i int) int64 { return b.buf[(b.head+i)&(len(b.buf)-1)] }

// front returns the offset at the front, and false if the backlog is empty.
func (b *backlog) front() (int64, bool) {
	if b == nil || b.n == 0 {
		return 0, false
	}
	return b.buf[b.head], true
}

// contains reports whether x is in the backlog.
func (b *backlog) contains(x int64) bool {
	switch {
	case b == nil:
		return false
	case b.index != nil:
		_, ok := b.index[x]
		return ok
	case !b.unordered:
		lo, hi := 0, b.n // binary search of the sorted ring
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if b.at(mid) < x {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return lo < b.n && b.at(lo) == x
	}
	for i := range b.n {
		if b.at(i) == x {
			return true
		}
	}
	return false
}

// pushBack appends x at the back unless it is already present, and reports
// whether it was added.
func (b *backlog) pushBack(x int64) bool {
	// In order, x is new without a search; an unordered backlog may hold
	// anything anywhere.
	inOrder := b.n == 0 || (!b.unordered && x > b.at(b.n-1))
	if !inOrder && b.contains(x) {
		return false
	}
	b.grow()
	b.buf[(b.head+b.n)&(len(b.buf)-1)] = x
	b.n++
	b.added(x, inOrder)
	return true
}

// pushFront inserts x at the front unless it is already present, and reports
// whether it was added.
func (b *backlog) pushFront(x int64) bool {
	inOrder := b.n == 0 || (!b.unordered && x < b.buf[b.head])
	if !inOrder && b.contains(x) {
		return false
	}
	b.grow()
	b.head = (b.head - 1) & (len(b.buf) - 1)
	b.buf[b.head] = x
	b.n++
	b.added(x, inOrder)
	return true
}

// popFront removes and returns the front offset, and false if the backlog is
// empty.
func (b *backlog) popFront() (int64, bool) {
	if b == nil || b.n == 0 {
		return 0, false
	}
	x := b.buf[b.head]
	b.head = (b.head + 1) & (len(b.buf) - 1)
	b.n--
	b.removed(x)
	return x, true
}

// remove deletes x wherever it is, keeping the order of the rest, and reports
// whether it was present. It is O(n); the hot path never calls it.
func (b *backlog) remove(x int64) bool {
	if !b.contains(x) {
		return false
	}
	mask := len(b.buf) - 1
	i := 0
	for b.at(i) != x {
		i++
	}
	for ; i < b.n-1; i++ { // shift the tail forward over x
		b.buf[(b.head+i)&mask] = b.buf[(b.head+i+1)&mask]
	}
	b.n--
	b.removed(x)
	return true
}

// grow makes room for one more offset.
func (b *backlog) grow() {
	if b.n < len(b.buf) {
		return
	}
	size := max(2*len(b.buf), 4)
	buf := make([]int64, size)
	for i := range b.n {
		buf[i] = b.at(i)
	}
	b.buf, b.head = buf, 0
}

// added updates the index after x joined the backlog; inOrder reports that
// the ring was sorted and still is.
func (b *backlog) added(x int64, inOrder bool) {
	if !inOrder {
		b.unordered = true
	}
	switch {
	case !b.unordered:
		return // the ring is sorted: no index needed
	case b.index != nil:
		b.index[x] = struct{}{}
	case b.n > smallBacklog:
		b.index = make(map[int64]struct{}, 2*b.n)
		for i := range b.n {
			b.index[b.at(i)] = struct{}{}
		}
	}
}

// removed updates the index after x left the backlog, and releases memory
// once the backlog is empty so that idle domains stay small.
func (b *backlog) removed(x int64) {
	if b.index != nil {
		delete(b.index, x)
	}
	if b.n == 0 {
		b.index = nil
		b.unordered = false
		b.head = 0
		if len(b.buf) > keepBacklogCap {
			b.buf = nil
		}
	}
}

// check verifies the backlog's own invariants: a backlog not marked
// unordered is sorted and has no index, and an index appears only past
// smallBacklog.
func (b *backlog) check() error {
	if !b.unordered {
		if b.index != nil {
			return errors.New("an ordered backlog has an index")
		}
		for i := 1; i < b.n; i++ {
			if b.at(i-1) >= b.at(i) {
				return fmt.Errorf("ordered backlog has %d before %d", b.at(i-1), b.at(i))
			}
		}
	}
	if b.index == nil && b.unordered && b.n > smallBacklog {
		return fmt.Errorf("%d unordered offsets but no index", b.n)
	}
	if b.n == 0 && (b.unordered || b.head != 0) {
		return fmt.Errorf("empty backlog is marked unordered (%t) or has head %d", b.unordered, b.head)
	}
	return nil
}

// max returns the highest offset in the backlog, which must not be empty:
// its back, if it is ordered.
func (b *backlog) max() int64 {
	if !b.unordered {
		return b.at(b.n - 1)
	}
	top := b.at(0)
	for i := 1; i < b.n; i++ {
		top = max(top, b.at(i))
	}
	return top
}

// appendTo appends the backlog's offsets, front first, to dst.
func (b *backlog) appendTo(dst []int64) []int64 {
	for i := range b.len() {
		dst = append(dst, b.at(i))
	}
	return dst
}
