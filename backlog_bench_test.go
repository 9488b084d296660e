package worklease

import (
	"container/list"
	"fmt"
	"testing"
)

// sliceDeque is BenchmarkDeque's baseline: the simplest honest FIFO of
// offsets, a slice with a head index. It appends at the back, reads at the
// head, and compacts when it empties or when the head passes half the
// length, so its memory stays bounded and its steady state allocates
// nothing. Unlike backlog it does not de-duplicate.
type sliceDeque struct {
	buf  []int64
	head int // index in buf of the front; buf[:head] is dead
}

func (q *sliceDeque) pushBack(x int64) { q.buf = append(q.buf, x) }

func (q *sliceDeque) popFront() (int64, bool) {
	if q.head == len(q.buf) {
		return 0, false
	}
	x := q.buf[q.head]
	q.head++
	switch {
	case q.head == len(q.buf):
		q.buf, q.head = q.buf[:0], 0
	case q.head > len(q.buf)/2:
		n := copy(q.buf, q.buf[q.head:])
		q.buf, q.head = q.buf[:n], 0
	}
	return x, true
}

// BenchmarkDeque compares backlog with a slice and a head index, and with
// container/list for reference. The target (see internal/benchtable):
// backlog within 3x of the slice, with no allocations at steady state.
//
// Each iteration pops the front offset, checks it is the oldest one pushed,
// and pushes the next offset at the back, so the deque holds depth offsets
// between iterations and never more. backlog's cost includes its
// de-duplicating membership check: a scan of the ring while it holds at
// most smallBacklog offsets, an index map past that. The slice and the list
// do no such check.
//
// Each implementation has its own loop on its concrete type, not one loop
// over an interface: a dynamic call per operation would cost about as much
// as the operations and flatten the ratios.
func BenchmarkDeque(b *testing.B) {
	impls := []struct {
		name string
		run  func(b *testing.B, depth int64)
	}{
		{"backlog", benchBacklog},
		{"slice", benchSliceDeque},
		{"list", benchList},
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			for _, depth := range []int64{smallBacklog, 1000} {
				b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
					impl.run(b, depth)
				})
			}
		})
	}
}

func benchBacklog(b *testing.B, depth int64) {
	var q backlog
	for x := range depth {
		q.pushBack(x)
	}
	b.ReportAllocs()
	for want := int64(0); b.Loop(); want++ {
		if x, ok := q.popFront(); !ok || x != want {
			b.Fatalf("popFront = %d, %t; want %d", x, ok, want)
		}
		if !q.pushBack(want + depth) {
			b.Fatalf("pushBack(%d) found it already queued", want+depth)
		}
	}
}

func benchSliceDeque(b *testing.B, depth int64) {
	var q sliceDeque
	for x := range depth {
		q.pushBack(x)
	}
	b.ReportAllocs()
	for want := int64(0); b.Loop(); want++ {
		if x, ok := q.popFront(); !ok || x != want {
			b.Fatalf("popFront = %d, %t; want %d", x, ok, want)
		}
		q.pushBack(want + depth)
	}
}

func benchList(b *testing.B, depth int64) {
	q := list.New()
	for x := range depth {
		q.PushBack(x)
	}
	b.ReportAllocs()
	for want := int64(0); b.Loop(); want++ {
		e := q.Front()
		if e == nil || e.Value.(int64) != want {
			b.Fatalf("Front = %v; want %d", e, want)
		}
		q.Remove(e)
		q.PushBack(want + depth)
	}
}
