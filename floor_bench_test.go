package worklease_test

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// floor is the least a correct cycle can cost, as issue 5 defines it: a
// map lookup under an RWMutex, a per-record mutex, a watermark for terminal
// offsets, a fence counter and one clock read for the grant time.
type floor struct {
	mu      sync.RWMutex
	records map[string]*floorRecord
}

type floorRecord struct {
	mu         sync.Mutex
	leased     bool
	offset     int64
	fence      uint64
	acquiredAt time.Time
	watermark  int64 // every offset at or below is terminal
}

func newFloor(names []string) *floor {
	f := &floor{records: make(map[string]*floorRecord, len(names))}
	for _, n := range names {
		f.records[n] = &floorRecord{watermark: -1}
	}
	return f
}

func (f *floor) lookup(domain string) *floorRecord {
	f.mu.RLock()
	r := f.records[domain]
	f.mu.RUnlock()
	return r
}

func (f *floor) cycle(domain string, offset int64) {
	r := f.lookup(domain)
	now := time.Now()
	r.mu.Lock()
	if r.leased || offset <= r.watermark {
		panic("floor: not grantable")
	}
	r.leased, r.offset, r.acquiredAt = true, offset, now
	r.fence++
	fence := r.fence
	r.mu.Unlock()

	r = f.lookup(domain)
	r.mu.Lock()
	if !r.leased || r.fence != fence {
		panic("floor: token mismatch")
	}
	r.watermark, r.leased = r.offset, false
	r.mu.Unlock()
}

// BenchmarkFloorCycle is BenchmarkCycle's floor: compare their ns/op.
func BenchmarkFloorCycle(b *testing.B) {
	for _, n := range []int{1, 1_000, 100_000} {
		b.Run(fmt.Sprintf("domains=%d", n), func(b *testing.B) {
			names := domainNames(n)
			f := newFloor(names)
			next := make([]int64, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				d := i % n
				f.cycle(names[d], next[d])
				next[d]++
			}
		})
	}
}
