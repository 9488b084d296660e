// Command benchtable reads the output of go test -bench on standard input,
// copies it to standard output unchanged, and then prints a Markdown table
// that compares the benchmarks against the project's performance targets:
// ratios between pairs of benchmarks, memory figures, and bytes allocated
// per operation on the hot path, followed by a table of how a cycle's time
// and a domain's memory grow with the number of domains. make bench runs
// it:
//
//	go test -run='^$' -bench=. -count=5 -cpu=1,2 -benchmem . | go run ./internal/benchtable -doc docs/performance.md
//
// With -doc, it also writes the two tables into that Markdown file, each
// between its pair of marker comments, which must be there and which it
// keeps:
//
//	<!-- benchtable:targets -->
//	…
//	<!-- /benchtable:targets -->
//
// and the same with benchtable:curve. The rest of the file is left as it
// is. The file is rewritten only if the input held the results of a row
// of the targets table at least, so that a run that failed before its
// benchmarks leaves the last figures in place.
//
// Every figure is the median of a benchmark's runs in the input (run with
// -count to get several), taken separately for each GOMAXPROCS value that
// -cpu asked for; a ratio divides two such medians. A row whose benchmarks
// are missing from the input reads "not run". Benchmark names are assumed
// to be unique across packages.
//
// The exit status is always 0, even if standard input cannot be read to
// the end: the table reports on the targets, it does not enforce them, as
// timings vary from machine to machine. make bench takes its own status
// from go test.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The targets. A quantity with procs 0 is taken at the lowest GOMAXPROCS
// that the input has for it (for a ratio, the lowest that both sides have):
// the benchmarks it names are sequential, so GOMAXPROCS should not matter.
var rows = []row{
	cycleRow("BenchmarkFloorCycle", 1, 1.3),
	cycleRow("BenchmarkFloorCycle", 1_000, 1.5),
	cycleRow("BenchmarkFloorCycle", 100_000, 1.5),
	cycleRow("BenchmarkFloorCycle", 1_000_000, 1.3),
	cycleRow("BenchmarkFloorCycleTimeline", 1_000, 1.5),
	{
		measure: "BenchmarkCycle/domains=1000000 − domains=1000 ÷ the same of BenchmarkFloorCycle, ns/op",
		meaning: "from a thousand domains to a million, a cycle grows by no more time than the floor's does",
		value: ratio2(
			difference(
				quantity{"BenchmarkCycle/domains=1000000", 0, "ns/op"},
				quantity{"BenchmarkCycle/domains=1000", 0, "ns/op"}),
			difference(
				quantity{"BenchmarkFloorCycle/domains=1000000", 0, "ns/op"},
				quantity{"BenchmarkFloorCycle/domains=1000", 0, "ns/op"})),
		atMost: true, target: 1,
	},
	{
		measure: "BenchmarkCycleParallel/domains=100000 ÷ BenchmarkGlobalFloorParallel/domains=100000, ns/op at cpu=2",
		meaning: "with two cores over 100,000 domains, the sharded Manager takes at most 0.6 of the time of one global mutex",
		value: ratio(
			quantity{"BenchmarkCycleParallel/domains=100000", 2, "ns/op"},
			quantity{"BenchmarkGlobalFloorParallel/domains=100000", 2, "ns/op"}),
		atMost: true, target: 0.6,
	},
	{
		measure: "BenchmarkCycleParallel/domains=100000, ns/op at cpu=1 ÷ at cpu=2",
		meaning: "two cores do at least 1.7 times the work of one",
		value: ratio(
			quantity{"BenchmarkCycleParallel/domains=100000", 1, "ns/op"},
			quantity{"BenchmarkCycleParallel/domains=100000", 2, "ns/op"}),
		atMost: false, target: 1.7,
	},
	dequeRow(8),
	dequeRow(1000),
	{
		measure: "BenchmarkMemory/idle-domains/domains=1000000, bytes/domain",
		meaning: "an idle domain with history, its key included, costs at most 256 bytes among a million",
		value:   median(quantity{"BenchmarkMemory/idle-domains/domains=1000000", 0, "bytes/domain"}),
		atMost:  true, target: 256,
	},
	{
		measure: "BenchmarkMemory/offsets/hole-every=0, bytes/1M-offsets",
		meaning: "a million offsets processed in order leave at most 1 KiB of history",
		value:   median(quantity{"BenchmarkMemory/offsets/hole-every=0", 0, "bytes/1M-offsets"}),
		atMost:  true, target: 1024,
	},
	{
		measure: "BenchmarkMemory/offsets/hole-every=100, bytes/offset",
		meaning: "with a hole every 100 offsets, history costs at most half a byte per offset",
		value:   median(quantity{"BenchmarkMemory/offsets/hole-every=100", 0, "bytes/offset"}),
		atMost:  true, target: 0.5,
	},
	{
		measure: "BenchmarkProduce/call=Append ÷ call=Enqueue, ns/op",
		meaning: "in memory, storing a 100-byte payload under the offset the domain assigns, against the caller's own offset (the Manager's Enqueue: it has no EnqueueMany, each call is one step)",
		value: ratio(
			quantity{"BenchmarkProduce/call=Append", 0, "ns/op"},
			quantity{"BenchmarkProduce/call=Enqueue", 0, "ns/op"}),
		reported: true,
	},
	{
		measure: "BenchmarkManagerProduce/call=Append ÷ call=Enqueue, ns/op",
		meaning: "the same on a journal under wal.SyncNone",
		value: ratio(
			quantity{"BenchmarkManagerProduce/call=Append", 0, "ns/op"},
			quantity{"BenchmarkManagerProduce/call=Enqueue", 0, "ns/op"}),
		reported: true,
	},
	{
		measure:  "BenchmarkAppendKeys, bytes/key",
		meaning:  "the heap an idempotency key of 16 bytes takes for its window, the key included",
		value:    median(quantity{"BenchmarkAppendKeys", 0, "bytes/key"}),
		reported: true,
	},
	{
		measure: "BenchmarkPayloadBacklog, heap-MiB",
		meaning: "a backlog of a million queued 1 KiB payloads costs a journaled Manager at most 256 MiB of heap: the payloads stay in the journal's files",
		value:   median(quantity{"BenchmarkPayloadBacklog", 0, "heap-MiB"}),
		atMost:  true, target: 256,
	},
	{
		measure: "BenchmarkSucceedNext/domains=1000/impl=SucceedNext ÷ impl=Succeed+TryAcquire, ns/op",
		meaning: "finishing an offset and leasing the next in one call costs no more than the two calls it replaces",
		value: ratio(
			quantity{"BenchmarkSucceedNext/domains=1000/impl=SucceedNext", 0, "ns/op"},
			quantity{"BenchmarkSucceedNext/domains=1000/impl=Succeed+TryAcquire", 0, "ns/op"}),
		atMost: true, target: 1,
	},
	allocRow("BenchmarkCycle"),
	allocRow("BenchmarkFailRetry"),
	allocRow("BenchmarkEnqueueHandOff"),
	allocRow("BenchmarkSucceedNext"),
	{
		measure: "BenchmarkManagerDurable/callers=64 ÷ callers=1, ops/s",
		meaning: "64 concurrent durable callers share fsyncs: at least 20 times the throughput of one",
		value: ratio(
			quantity{"BenchmarkManagerDurable/callers=64", 0, "ops/s"},
			quantity{"BenchmarkManagerDurable/callers=1", 0, "ops/s"}),
		atMost: false, target: 20,
	},
	{
		measure: "BenchmarkManagerNoSync ÷ BenchmarkManagerInMemory, ns/op",
		meaning: "journaling under wal.SyncNone costs a cycle at most 3 times the Manager without a journal",
		value: ratio(
			quantity{"BenchmarkManagerNoSync", 0, "ns/op"},
			quantity{"BenchmarkManagerInMemory", 0, "ns/op"}),
		atMost: true, target: 3,
	},
	{
		measure: "BenchmarkManagerReplay, records/s",
		meaning: "a restart replays at least a million records a second",
		value:   median(quantity{"BenchmarkManagerReplay", 0, "records/s"}),
		atMost:  false, target: 1e6,
	},
	{
		measure: "BenchmarkPoolOverhead/impl=pool ÷ impl=loop, ns/op",
		meaning: "a worker Pool costs a job at most 1.2 times what a hand-written pull loop over the Manager does",
		value: ratio(
			quantity{"BenchmarkPoolOverhead/impl=pool", 0, "ns/op"},
			quantity{"BenchmarkPoolOverhead/impl=loop", 0, "ns/op"}),
		atMost: true, target: 1.2,
	},
	{
		measure: "BenchmarkPoolThroughput/impl=pool ÷ impl=unordered, jobs/s",
		meaning: "with 1,000 domains and a 1 ms handler, a Pool that keeps each domain's order runs at least 0.9 of the jobs of a pool that keeps none",
		value: ratio(
			quantity{"BenchmarkPoolThroughput/impl=pool", 0, "jobs/s"},
			quantity{"BenchmarkPoolThroughput/impl=unordered", 0, "jobs/s"}),
		atMost: false, target: 0.9,
	},
	{
		measure: "BenchmarkKafka/handler=1ms/impl=parallel ÷ impl=per-partition, records/s",
		meaning: "with 4 partitions, 1,000 keys and a 1 ms handler, workleasekafka's 64 handlers in key order run at least 10 times the records of franz-go's goroutine-per-partition consumer",
		value: ratio(
			quantity{"BenchmarkKafka/handler=1ms/impl=parallel", 0, "records/s"},
			quantity{"BenchmarkKafka/handler=1ms/impl=per-partition", 0, "records/s"}),
		atMost: false, target: 10,
	},
	{
		measure: "BenchmarkKafka/handler=none/impl=parallel ÷ impl=per-partition, ns/op",
		meaning: "with a handler that does nothing, a record costs workleasekafka at most 1.5 times what it costs the goroutine-per-partition consumer",
		value: ratio(
			quantity{"BenchmarkKafka/handler=none/impl=parallel", 0, "ns/op"},
			quantity{"BenchmarkKafka/handler=none/impl=per-partition", 0, "ns/op"}),
		atMost: true, target: 1.5,
	},
	{
		measure: "BenchmarkPostgresCycle/domains=1000 ÷ BenchmarkPostgresSkipLocked, cycles/s",
		meaning: "on PostgreSQL, a lease cycle runs at least as fast as a plain SKIP LOCKED job table's claim and complete",
		value: ratio(
			quantity{"BenchmarkPostgresCycle/domains=1000", 0, "cycles/s"},
			quantity{"BenchmarkPostgresSkipLocked", 0, "cycles/s"}),
		atMost: false, target: 1,
	},
	{
		measure: "BenchmarkPostgresCycle, most ÷ fewest cycles/s of domains=100, 1000, 10000",
		meaning: "on PostgreSQL, a cycle costs the same from 100 to 10,000 domains, within 25 %",
		value: spread("cycles/s",
			"BenchmarkPostgresCycle/domains=100", "BenchmarkPostgresCycle/domains=1000", "BenchmarkPostgresCycle/domains=10000"),
		atMost: true, target: 1.25,
	},
	{
		measure: "BenchmarkPostgresPullCycle/domains=1000 ÷ BenchmarkPostgresSkipLocked, cycles/s",
		meaning: "unbatched, one claim and its completion a statement each, against the plain SKIP LOCKED job table's",
		value: ratio(
			quantity{"BenchmarkPostgresPullCycle/domains=1000", 0, "cycles/s"},
			quantity{"BenchmarkPostgresSkipLocked", 0, "cycles/s"}),
		reported: true,
	},
	{
		measure: "BenchmarkPostgresPullNext ÷ BenchmarkPostgresSkipLocked, cycles/s",
		meaning: "one offset at a time, ended with ClaimNext, which leases the domain's next in the same statement, against the job table",
		value: ratio(
			quantity{"BenchmarkPostgresPullNext", 0, "cycles/s"},
			quantity{"BenchmarkPostgresSkipLocked", 0, "cycles/s"}),
		reported: true,
	},
	{
		measure: "BenchmarkPostgresPullCycle, most ÷ fewest cycles/s of domains=100, 1000, 10000",
		meaning: "a claim and its completion cost the same from 100 to 10,000 domains, within 25 %",
		value: spread("cycles/s",
			"BenchmarkPostgresPullCycle/domains=100", "BenchmarkPostgresPullCycle/domains=1000", "BenchmarkPostgresPullCycle/domains=10000"),
		atMost: true, target: 1.25,
	},
	{
		measure: "BenchmarkPostgresEnqueue/append ÷ batch=100, items/s",
		meaning: "offsets the database assigns, one Append a call, against EnqueueMany's batches of 100 chosen offsets",
		value: ratio(
			quantity{"BenchmarkPostgresEnqueue/append", 0, "items/s"},
			quantity{"BenchmarkPostgresEnqueue/batch=100", 0, "items/s"}),
		reported: true,
	},
	{
		measure: "BenchmarkPostgresEnqueue/append-key ÷ append, items/s",
		meaning: "what an idempotency key costs an Append",
		value: ratio(
			quantity{"BenchmarkPostgresEnqueue/append-key", 0, "items/s"},
			quantity{"BenchmarkPostgresEnqueue/append", 0, "items/s"}),
		reported: true,
	},
	{
		measure: "BenchmarkPostgresHotDomain/workers=16 ÷ workers=1, cycles/s",
		meaning: "fifteen workers waiting for work take at most a fifth off one hot domain's throughput",
		value: ratio(
			quantity{"BenchmarkPostgresHotDomain/workers=16", 0, "cycles/s"},
			quantity{"BenchmarkPostgresHotDomain/workers=1", 0, "cycles/s"}),
		atMost: false, target: 0.8,
	},
	riverRow("BenchmarkPoolBurnDown", "BenchmarkRiverBurnDown", "none", "jobs/s", false, 1.5,
		"a worker Pool over the pg Manager, in order per domain and fenced, burns down jobs at least 1.5 times as fast as River"),
	riverRow("BenchmarkPoolBurnDown", "BenchmarkRiverBurnDown", "1ms", "jobs/s", false, 1.5,
		"the same with a handler that takes a millisecond"),
	riverRow("BenchmarkPoolContinuous", "BenchmarkRiverContinuous", "none", "jobs/s", false, 1,
		"with river bench's producer storing while the jobs run, a Pool runs at least as many jobs as River"),
	riverRow("BenchmarkPoolContinuous", "BenchmarkRiverContinuous", "1ms", "jobs/s", false, 1,
		"the same with a handler that takes a millisecond"),
	riverRow("BenchmarkPoolContinuous", "BenchmarkRiverContinuous", "none", "p99-ms", true, 1,
		"with river bench's producer, the 99th percentile of a job's time from its store to its start is no longer than River's"),
	riverRow("BenchmarkPoolContinuous", "BenchmarkRiverContinuous", "1ms", "p99-ms", true, 1,
		"the same with a handler that takes a millisecond"),
	{
		measure: "BenchmarkPoolBurnDown/handler=none ÷ BenchmarkFloorBurnDown, jobs/s",
		meaning: "the Pool against a loop written by hand over the pg Manager's batch calls, the floor of what it can do",
		value: ratio(
			quantity{"BenchmarkPoolBurnDown/handler=none", 0, "jobs/s"},
			quantity{"BenchmarkFloorBurnDown", 0, "jobs/s"}),
		reported: true,
	},
}

// cycleRow compares BenchmarkCycle with a floor: BenchmarkFloorCycle reads
// the clock with time.Now, BenchmarkFloorCycleTimeline as the Manager does.
func cycleRow(floor string, domains int, target float64) row {
	suffix := "/domains=" + strconv.Itoa(domains)
	meaning := "a cycle costs at most " + strconv.FormatFloat(target, 'f', -1, 64) + " times the least a correct one can"
	if floor == "BenchmarkFloorCycleTimeline" {
		meaning += ", even with the Manager's cheaper clock read in the floor"
	}
	return row{
		measure: "BenchmarkCycle" + suffix + " ÷ " + floor + suffix + ", ns/op",
		meaning: meaning,
		value: ratio(
			quantity{"BenchmarkCycle" + suffix, 0, "ns/op"},
			quantity{floor + suffix, 0, "ns/op"}),
		atMost: true, target: target,
	}
}

// riverRow compares a Pool benchmark with River's of the same handler,
// in unit.
func riverRow(pool, river, handler, unit string, atMost bool, target float64, meaning string) row {
	suffix := "/handler=" + handler
	return row{
		measure: pool + suffix + " ÷ " + river + suffix + ", " + unit,
		meaning: meaning,
		value:   ratio(quantity{pool + suffix, 0, unit}, quantity{river + suffix, 0, unit}),
		atMost:  atMost, target: target,
	}
}

func dequeRow(depth int) row {
	suffix := "/depth=" + strconv.Itoa(depth)
	return row{
		measure: "BenchmarkDeque/impl=backlog" + suffix + " ÷ impl=slice" + suffix + ", ns/op",
		meaning: "a backlog's pop and push cost at most 3 times a slice's",
		value: ratio(
			quantity{"BenchmarkDeque/impl=backlog" + suffix, 0, "ns/op"},
			quantity{"BenchmarkDeque/impl=slice" + suffix, 0, "ns/op"}),
		atMost: true, target: 3,
	}
}

func allocRow(name string) row {
	return row{
		measure: name + ", B/op",
		meaning: "the hot path allocates nothing",
		value:   largest(name, "B/op"),
		atMost:  true, target: 0,
	}
}

// A row is one line of the table: a value computed from the results and the
// target it must meet.
type row struct {
	measure string                        // what is measured
	meaning string                        // why it matters, in one line
	value   func(results) (float64, bool) // false if a benchmark is missing
	atMost  bool                          // the target is an upper bound; else a lower one
	target  float64
	// reported marks a figure shown for comparison, with no target: its
	// result reads "reported" and atMost and target are unused.
	reported bool
}

// A quantity names one benchmark's median in one unit.
type quantity struct {
	name  string // the full name without the -N GOMAXPROCS suffix
	procs int    // GOMAXPROCS; 0 for the lowest the input has
	unit  string // as go test prints it: "ns/op", "B/op" or a custom metric's unit
}

// A key identifies one benchmark run at one GOMAXPROCS.
type key struct {
	name  string
	procs int
}

// results holds every value read, by benchmark and unit, in input order.
type results map[key]map[string][]float64

// median returns the median of q's values, and false if there are none.
func (r results) median(q quantity) (float64, bool) {
	vs := r[key{q.name, q.procs}][q.unit]
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// procs returns, in increasing order, the GOMAXPROCS values at which the
// input has values of unit for the benchmark name.
func (r results) procs(name, unit string) []int {
	var ps []int
	for k, units := range r {
		if k.name == name && len(units[unit]) > 0 {
			ps = append(ps, k.procs)
		}
	}
	slices.Sort(ps)
	return ps
}

// median returns a row value: q's median.
func median(q quantity) func(results) (float64, bool) {
	return func(r results) (float64, bool) {
		q := q // the row may be evaluated again, on other results
		if q.procs == 0 {
			ps := r.procs(q.name, q.unit)
			if len(ps) == 0 {
				return 0, false
			}
			q.procs = ps[0]
		}
		return r.median(q)
	}
}

// ratio returns a row value: num's median divided by den's. Either both
// have procs 0, and then both are taken at the lowest GOMAXPROCS they share,
// or neither has.
func ratio(num, den quantity) func(results) (float64, bool) {
	return func(r results) (float64, bool) {
		x, ok := ratioParts(r, num, den)
		if !ok || x[1] == 0 { // a zero time means no real measurement
			return 0, false
		}
		return x[0] / x[1], true
	}
}

// ratioParts returns the medians of a and b, taken at the lowest GOMAXPROCS
// they share if both have procs 0.
func ratioParts(r results, a, b quantity) ([2]float64, bool) {
	if a.procs == 0 && b.procs == 0 {
		aps, bps := r.procs(a.name, a.unit), r.procs(b.name, b.unit)
		i := slices.IndexFunc(aps, func(p int) bool { return slices.Contains(bps, p) })
		if i < 0 {
			return [2]float64{}, false
		}
		a.procs, b.procs = aps[i], aps[i]
	}
	x, ok1 := r.median(a)
	y, ok2 := r.median(b)
	return [2]float64{x, y}, ok1 && ok2
}

// difference returns a row value: a's median less b's, both taken at the
// lowest GOMAXPROCS they share.
func difference(a, b quantity) func(results) (float64, bool) {
	return func(r results) (float64, bool) {
		x, ok1 := ratioParts(r, a, b)
		if !ok1 {
			return 0, false
		}
		return x[0] - x[1], true
	}
}

// ratio2 returns a row value: num divided by den, two row values.
func ratio2(num, den func(results) (float64, bool)) func(results) (float64, bool) {
	return func(r results) (float64, bool) {
		n, ok1 := num(r)
		d, ok2 := den(r)
		if !ok1 || !ok2 || d == 0 {
			return 0, false
		}
		return n / d, true
	}
}

// spread returns a row value: the largest median of unit among the
// benchmarks names divided by the smallest, each at the lowest GOMAXPROCS
// the input has for it.
func spread(unit string, names ...string) func(results) (float64, bool) {
	return func(r results) (float64, bool) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, name := range names {
			v, ok := median(quantity{name, 0, unit})(r)
			if !ok || v <= 0 {
				return 0, false
			}
			lo, hi = min(lo, v), max(hi, v)
		}
		return hi / lo, true
	}
}

// largest returns a row value: the largest median of unit over the
// benchmark name, its sub-benchmarks, and every GOMAXPROCS. The footnote in
// write says so.
func largest(name, unit string) func(results) (float64, bool) {
	return func(r results) (float64, bool) {
		found, most := false, math.Inf(-1)
		for k := range r {
			if k.name != name && !strings.HasPrefix(k.name, name+"/") {
				continue
			}
			if v, ok := r.median(quantity{k.name, k.procs, unit}); ok {
				found, most = true, max(most, v)
			}
		}
		return most, found
	}
}

// read copies in to out unchanged, line by line so that progress shows, and
// collects the benchmark results on the way. It reports whether the input
// ended with a newline (an empty input counts as one).
func read(in io.Reader, out io.Writer) (r results, newline bool, err error) {
	r, newline = make(results), true
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			newline = line[len(line)-1] == '\n'
		}
		if _, werr := io.WriteString(out, line); werr != nil {
			return r, newline, werr
		}
		r.add(line)
		if errors.Is(err, io.EOF) {
			return r, newline, nil
		}
		if err != nil {
			return r, newline, err
		}
	}
}

// add records the values on line if it is a benchmark result, such as
//
//	BenchmarkCycle/domains=1000-2   	 1234567	       812.3 ns/op	       0 B/op
//
// and ignores it otherwise.
func (r results) add(line string) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil { // the iteration count
		return
	}
	k := parseName(f[0])
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return
		}
		if r[k] == nil {
			r[k] = make(map[string][]float64)
		}
		r[k][f[i+1]] = append(r[k][f[i+1]], v)
	}
}

// parseName splits a benchmark's printed name into its name and GOMAXPROCS.
// go test appends "-N" for GOMAXPROCS N, except when N is 1.
func parseName(s string) key {
	i := strings.LastIndexByte(s, '-')
	if i < 0 || strings.ContainsFunc(s[i+1:], func(c rune) bool { return c < '0' || c > '9' }) {
		return key{s, 1}
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 1 { // empty, zero or out of range: not a suffix
		return key{s, 1}
	}
	return key{s[:i], n}
}

// A verdict is one row evaluated.
type verdict struct {
	row
	v   float64
	ran bool
	met bool
}

func evaluate(rs []row, r results) []verdict {
	vs := make([]verdict, len(rs))
	for i, rw := range rs {
		v, ok := rw.value(r)
		vs[i] = verdict{row: rw, v: v, ran: ok}
		if ok && !rw.reported {
			vs[i].met = v <= rw.target
			if !rw.atMost {
				vs[i].met = v >= rw.target
			}
		}
	}
	return vs
}

// write prints vs as a Markdown table.
func write(w io.Writer, vs []verdict) error {
	var b strings.Builder
	b.WriteString("\n| Measure | Value | Target | Result | Meaning |\n")
	b.WriteString("|---|---:|---:|---|---|\n")
	for _, v := range vs {
		value, result := "–", "not run"
		if v.ran {
			value, result = number(v.v), "not met"
			if v.met {
				result = "met"
			}
		}
		target := "≥ " + strconv.FormatFloat(v.target, 'f', -1, 64)
		if v.atMost {
			target = "≤ " + strconv.FormatFloat(v.target, 'f', -1, 64)
		}
		if v.reported {
			target = "–"
			if v.ran {
				result = "reported"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", v.measure, value, target, result, v.meaning)
	}
	b.WriteString("\nValues are medians of each benchmark's runs, and a ratio divides two medians.\n" +
		"Ratios without a cpu compare the lowest cpu the input has for both sides; a B/op row\n" +
		"shows the largest median over the benchmark's sub-benchmarks and cpus.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// curveDomains are the domain counts of the scale curve.
var curveDomains = []int{1_000, 100_000, 1_000_000}

// curveColumns are the scale curve's columns: a quantity at each domain
// count, whose name ends in "/domains=N".
var curveColumns = []struct {
	head  string
	name  string
	procs int
	unit  string
}{
	{"Cycle, 1 core (ns)", "BenchmarkCycle", 0, "ns/op"},
	{"Floor, 1 core (ns)", "BenchmarkFloorCycle", 0, "ns/op"},
	{"Cycle, 2 cores (ns)", "BenchmarkCycleParallel", 2, "ns/op"},
	{"Global floor, 2 cores (ns)", "BenchmarkGlobalFloorParallel", 2, "ns/op"},
	{"Idle domain (bytes)", "BenchmarkMemory/idle-domains", 0, "bytes/domain"},
}

// writeCurve prints how a cycle's time and a domain's memory grow with the
// number of domains, as a Markdown table.
func writeCurve(w io.Writer, r results) error {
	var b strings.Builder
	b.WriteString("\n| Domains |")
	for _, c := range curveColumns {
		b.WriteString(" " + c.head + " |")
	}
	b.WriteString("\n|---:|" + strings.Repeat("---:|", len(curveColumns)) + "\n")
	for _, n := range curveDomains {
		fmt.Fprintf(&b, "| %s |", number(float64(n)))
		for _, c := range curveColumns {
			cell := "–"
			if v, ok := median(quantity{c.name + "/domains=" + strconv.Itoa(n), c.procs, c.unit})(r); ok {
				cell = number(v)
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nA cycle's time at two cores is the wall time per cycle of two goroutines, each on\n" +
		"its own half of the domains.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// number formats x with three significant digits, or as a whole number from
// 100 up, never with an exponent.
func number(x float64) string {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(x))))
	return strconv.FormatFloat(x, 'f', max(digits, 0), 64)
}

// The markers around each table in a -doc file.
const (
	targetsMarker = "benchtable:targets"
	curveMarker   = "benchtable:curve"
)

// rewriteDoc returns doc, a Markdown text, with what stands between the
// pair of comments of each marker, <!-- marker --> and <!-- /marker -->,
// replaced by its table.
func rewriteDoc(doc string, tables map[string]string) (string, error) {
	for _, marker := range slices.Sorted(maps.Keys(tables)) {
		begin, end := "<!-- "+marker+" -->", "<!-- /"+marker+" -->"
		i := strings.Index(doc, begin)
		j := strings.Index(doc, end)
		if i < 0 || j < i {
			return "", fmt.Errorf("no %s … %s in the file", begin, end)
		}
		i += len(begin)
		doc = doc[:i] + "\n" + strings.TrimSpace(tables[marker]) + "\n" + doc[j:]
	}
	return doc, nil
}

// updateDoc writes the tables into the file named path (see rewriteDoc).
func updateDoc(path string, tables map[string]string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := rewriteDoc(string(doc), tables)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// ranAny reports whether any of vs ran.
func ranAny(vs []verdict) bool {
	return slices.ContainsFunc(vs, func(v verdict) bool { return v.ran })
}

func main() {
	doc := flag.String("doc", "", "also write the tables into this Markdown `file`, between its markers")
	flag.Parse()
	r, newline, err := read(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
	}
	if !newline {
		fmt.Println()
	}
	vs := evaluate(rows, r)
	var targets, curve strings.Builder
	if err := write(&targets, vs); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
	}
	if err := writeCurve(&curve, r); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
	}
	fmt.Print(targets.String(), curve.String())
	if *doc == "" {
		return
	}
	if !ranAny(vs) {
		fmt.Fprintf(os.Stderr, "benchtable: no benchmark a table names ran; %s is left as it is\n", *doc)
		return
	}
	if err := updateDoc(*doc, map[string]string{targetsMarker: targets.String(), curveMarker: curve.String()}); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		return
	}
	fmt.Fprintf(os.Stderr, "benchtable: wrote the tables into %s\n", *doc)
}
