package worklease_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// floor is the least a correct cycle can cost, as the performance targets
// define it: a map lookup under an RWMutex, a per-record mutex, a watermark
// for terminal offsets, a fence counter and one clock read for the grant
// time.
type floor struct {
	mu      sync.RWMutex
	records map[string]*floorRecord
	// timeline: read the clock as the Manager reads the system clock, the
	// wall time at start advanced by the monotonic clock (one vDSO call),
	// instead of with time.Now (two).
	timeline bool
	start    time.Time
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
	f := &floor{records: make(map[string]*floorRecord, len(names)), start: time.Now()}
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
	var now time.Time
	if f.timeline {
		now = f.start.Add(time.Since(f.start))
	} else {
		now = time.Now()
	}
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

// BenchmarkFloorCycle is BenchmarkCycle's floor, as the performance targets define it,
// reading the clock with time.Now: compare their ns/op.
func BenchmarkFloorCycle(b *testing.B) { benchmarkFloorCycle(b, false) }

// BenchmarkFloorCycleTimeline is BenchmarkFloorCycle reading the clock the
// way the Manager does: the same floor without the Manager's cheaper clock
// read as an advantage.
func BenchmarkFloorCycleTimeline(b *testing.B) { benchmarkFloorCycle(b, true) }

func benchmarkFloorCycle(b *testing.B, timeline bool) {
	for _, n := range cycleDomains {
		b.Run(fmt.Sprintf("domains=%d", n), func(b *testing.B) {
			names := domainNames(n)
			f := newFloor(names)
			f.timeline = timeline
			for _, d := range names {
				f.cycle(d, 0)
			}
			visit := scatteredVisits(names, 1)[0]
			b.ReportAllocs()
			b.ResetTimer()
			visitLoop(visit, b.Loop, f.cycle)
		})
	}
}

// globalFloor is the parallel floor: the same minimal work as floor, under
// one global mutex instead of a sharded map and per-record locks.
type globalFloor struct {
	mu      sync.Mutex
	records map[string]*floorRecord
}

func (g *globalFloor) cycle(domain string, offset int64) {
	now := time.Now()
	g.mu.Lock()
	r := g.records[domain]
	if r.leased || offset <= r.watermark {
		g.mu.Unlock()
		panic("global floor: not grantable")
	}
	r.leased, r.offset, r.acquiredAt = true, offset, now
	r.fence++
	fence := r.fence
	g.mu.Unlock()

	g.mu.Lock()
	r = g.records[domain]
	if !r.leased || r.fence != fence {
		g.mu.Unlock()
		panic("global floor: token mismatch")
	}
	r.watermark, r.leased = r.offset, false
	g.mu.Unlock()
}

// BenchmarkGlobalFloorParallel is BenchmarkCycleParallel's floor, visiting
// the domains the same way: compare their ns/op at the same domain count.
func BenchmarkGlobalFloorParallel(b *testing.B) {
	for _, n := range cycleDomains[1:] {
		b.Run(fmt.Sprintf("domains=%d", n), func(b *testing.B) {
			names := domainNames(n)
			g := &globalFloor{records: newFloor(names).records}
			for _, d := range names {
				g.cycle(d, 0)
			}
			benchmarkParallelCycles(b, names, g.cycle)
		})
	}
}

// benchmarkParallelCycles runs cycle from GOMAXPROCS goroutines, each over
// its own share of names in scattered order (see scatteredVisits), as
// BenchmarkCycleParallel does. Every domain must have finished offset 0.
func benchmarkParallelCycles(b *testing.B, names []string, cycle func(domain string, offset int64)) {
	visits := scatteredVisits(names, runtime.GOMAXPROCS(0))
	var goroutine atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// RunParallel starts GOMAXPROCS goroutines: one per share.
		visitLoop(visits[goroutine.Add(1)-1], pb.Next, cycle)
	})
}

// heapAfter returns how many heap bytes build leaves live.
func heapAfter(build func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc < before.HeapAlloc { // garbage from before was freed
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkMemory reports what domains and their history cost: bytes per
// idle domain with history, its key included, among a thousand, 100,000 and
// a million domains, bytes for a million offsets processed in order,
// bytes per offset when 1% of them are scattered holes, and bytes for a
// million sparse offsets (every 7th) with and without WithMonotonicOffsets.
// Each iteration builds the state afresh; the metrics are the point, not
// ns/op.
func BenchmarkMemory(b *testing.B) {
	idle := func(n int, opts ...worklease.Option) func(b *testing.B) {
		return func(b *testing.B) {
			names := domainNames(n) // the Manager keeps copies of its own, which count
			var perDomain float64
			for b.Loop() {
				var m *worklease.Manager
				used := heapAfter(func() {
					m = mustNew(b, opts...)
					for _, d := range names {
						for off := range int64(3) {
							cycle(m, d, off)
						}
					}
				})
				perDomain = float64(used) / float64(n)
				runtime.KeepAlive(m)
			}
			b.ReportMetric(perDomain, "bytes/domain")
		}
	}
	for _, n := range cycleDomains[1:] {
		b.Run(fmt.Sprintf("idle-domains/domains=%d", n), idle(n))
	}
	b.Run("idle-domains-monotonic/domains=100000", idle(100_000, worklease.WithMonotonicOffsets()))
	b.Run("sparse-offsets", func(b *testing.B) {
		const n, every = 1_000_000, 7
		for _, monotonic := range []bool{false, true} {
			b.Run(fmt.Sprintf("every=%d/monotonic=%v", every, monotonic), func(b *testing.B) {
				var opts []worklease.Option
				if monotonic {
					opts = append(opts, worklease.WithMonotonicOffsets())
				}
				var used uint64
				for b.Loop() {
					m := mustNew(b, opts...)
					cycle(m, "d", 0) // the record exists before measuring
					used = heapAfter(func() {
						for i := int64(1); i <= n; i++ {
							cycle(m, "d", i*every)
						}
					})
					runtime.KeepAlive(m)
				}
				b.ReportMetric(float64(used), "bytes/1M-offsets")
			})
		}
	})
	b.Run("offsets", func(b *testing.B) {
		const n = 1_000_000
		for _, holes := range []int{0, 100} { // a hole every `holes` offsets; 0: none
			b.Run(fmt.Sprintf("hole-every=%d", holes), func(b *testing.B) {
				var used uint64
				for b.Loop() {
					m := mustNew(b)
					cycle(m, "d", 0) // the record exists before measuring
					used = heapAfter(func() {
						for off := int64(1); off <= n; off++ {
							if holes > 0 && off%int64(holes) == 0 {
								continue
							}
							cycle(m, "d", off)
						}
					})
					runtime.KeepAlive(m)
				}
				b.ReportMetric(float64(used), "bytes/1M-offsets")
				b.ReportMetric(float64(used)/n, "bytes/offset")
			})
		}
	})
}
