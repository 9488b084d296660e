package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sample is go test -bench output as -cpu=1,2 -count=N prints it, cut down:
// at cpu=1 names have no suffix, at cpu=2 they end in -2.
const sample = `goos: linux
goarch: amd64
pkg: github.com/worklease/worklease
cpu: AMD EPYC
BenchmarkCycle/domains=1-2               	 1000000	       150.0 ns/op	       8 B/op	       0 allocs/op
BenchmarkCycle/domains=1000              	 1000000	       300.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycle/domains=1000              	 1000000	       310.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycle/domains=1000              	 1000000	       900.0 ns/op	      16 B/op	       1 allocs/op
BenchmarkCycle/domains=1000-2            	 1000000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycle/domains=100000            	 1000000	       400.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFloorCycle/domains=1-2          	 1000000	        50.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFloorCycle/domains=1000         	 1000000	       210.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFloorCycle/domains=1000         	 1000000	       200.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFloorCycle/domains=1000         	 1000000	       220.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFloorCycle/domains=1000-2       	 1000000	       999.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycleParallel/domains=1000-2    	 1000000	        99.0 ns/op	      64 B/op	       1 allocs/op
BenchmarkCycleParallel/domains=100000    	 1000000	       400.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycleParallel/domains=100000    	 1000000	       420.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycleParallel/domains=100000-2  	 1000000	       210.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycleParallel/domains=100000-2  	 1000000	       200.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkGlobalFloorParallel/domains=100000-2	 1000000	       250.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycle/domains=1000000           	 1000000	       700.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFloorCycle/domains=1000000      	 1000000	       600.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFailRetry                       	 1000000	        80.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkSucceedNext/domains=1000/impl=SucceedNext	 1000000	       150.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkSucceedNext/domains=1000/impl=Succeed+TryAcquire	 1000000	       200.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFailRetry-2                     	 1000000	        81.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkDeque/impl=backlog/depth=8      	100000000	        14.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkDeque/impl=slice/depth=8        	100000000	         4.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkDeque/impl=backlog/depth=1000   	100000000	       118.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkDeque/impl=list/depth=1000      	100000000	        80.0 ns/op	      56 B/op	       2 allocs/op
PASS
ok  	github.com/worklease/worklease	30.000s
pkg: github.com/worklease/worklease/wal
BenchmarkManagerDurable/callers=1-2      	    2000	    300000 ns/op	         2.000 fsyncs/op	      3000 ops/s	       0 B/op	       0 allocs/op
BenchmarkManagerDurable/callers=64-2     	  100000	     12000 ns/op	         0.06000 fsyncs/op	     75000 ops/s	       0 B/op	       0 allocs/op
BenchmarkManagerNoSync-2                 	 4000000	       280.0 ns/op	   3571428 ops/s	       3 B/op	       0 allocs/op
BenchmarkManagerInMemory-2               	13000000	        90.00 ns/op	  11111111 ops/s	       0 B/op	       0 allocs/op
BenchmarkManagerReplay-2                 	      12	  93000000 ns/op	 285.00 MB/s	   4300000 records/s	 6483318 B/op	  400291 allocs/op
pkg: github.com/worklease/worklease
BenchmarkMemory/idle-domains/domains=1000-2	       1	 123456789 ns/op	       300.0 bytes/domain
BenchmarkMemory/idle-domains/domains=1000000-2	       1	 123456789 ns/op	       250.5 bytes/domain
BenchmarkMemory/offsets/hole-every=0-2   	       1	 234567890 ns/op	       800.0 bytes/1M-offsets	         0.0008000 bytes/offset
BenchmarkMemory/offsets/hole-every=100-2 	       1	 234567890 ns/op	    600000 bytes/1M-offsets	         0.6000 bytes/offset
pkg: github.com/worklease/worklease/pg
BenchmarkPostgresCycle/domains=100-2     	   20000	    160000 ns/op	      6250 cycles/s
BenchmarkPostgresCycle/domains=1000-2    	   20000	    150000 ns/op	      6600 cycles/s
BenchmarkPostgresCycle/domains=1000-2    	   20000	    170000 ns/op	      5900 cycles/s
BenchmarkPostgresCycle/domains=1000-2    	   20000	    160000 ns/op	      6300 cycles/s
BenchmarkPostgresCycle/domains=10000-2   	   20000	    200000 ns/op	      5000 cycles/s
BenchmarkPostgresSkipLocked-2            	   20000	    170000 ns/op	      6000 cycles/s
BenchmarkPostgresPullCycle/domains=100-2 	   20000	    340000 ns/op	      3300 cycles/s
BenchmarkPostgresPullCycle/domains=1000-2 	   20000	    340000 ns/op	      3000 cycles/s
BenchmarkPostgresPullCycle/domains=10000-2	   20000	    340000 ns/op	      3600 cycles/s
BenchmarkPostgresPullNext-2              	   20000	    220000 ns/op	      4500 cycles/s
BenchmarkPostgresHotDomain/workers=1-2   	    3000	   1200000 ns/op	       800 cycles/s
BenchmarkPostgresHotDomain/workers=16-2  	    3000	   1300000 ns/op	       760 cycles/s
pkg: github.com/worklease/worklease/pg/riverbench
BenchmarkPoolBurnDown/handler=none-2     	  100000	     50000 ns/op	     20000 jobs/s
BenchmarkRiverBurnDown/handler=none-2    	  100000	    100000 ns/op	     10000 jobs/s
BenchmarkFloorBurnDown-2                 	  100000	     40000 ns/op	     25000 jobs/s
BenchmarkPoolContinuous/handler=none-2   	  200000	    100000 ns/op	      8000 jobs/s	      4000 p50-ms	      9000 p99-ms
BenchmarkRiverContinuous/handler=none-2  	  200000	    100000 ns/op	     10000 jobs/s	      3000 p50-ms	      6000 p99-ms
pkg: github.com/worklease/worklease/workleasekafka
BenchmarkKafka/handler=1ms/impl=parallel-2         	   20000	     20000 ns/op	     50000 records/s
BenchmarkKafka/handler=1ms/impl=per-partition-2    	   20000	    320000 ns/op	      3125 records/s
BenchmarkKafka/handler=none/impl=parallel-2        	 1000000	       900.0 ns/op	   1111111 records/s
BenchmarkKafka/handler=none/impl=per-partition-2   	 1000000	       450.0 ns/op	   2222222 records/s
BenchmarkBroken-2                        	--- FAIL: BenchmarkBroken-2
    bench_test.go:1: failed
FAIL
`

func TestParseName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want key
	}{
		{"BenchmarkFailRetry", key{"BenchmarkFailRetry", 1}},
		{"BenchmarkFailRetry-2", key{"BenchmarkFailRetry", 2}},
		{"BenchmarkCycle/domains=1000-16", key{"BenchmarkCycle/domains=1000", 16}},
		{"BenchmarkMemory/offsets/hole-every=0", key{"BenchmarkMemory/offsets/hole-every=0", 1}},
		{"BenchmarkMemory/offsets/hole-every=0-2", key{"BenchmarkMemory/offsets/hole-every=0", 2}},
		{"BenchmarkX-", key{"BenchmarkX-", 1}},
		{"BenchmarkX-+2", key{"BenchmarkX-+2", 1}},
	} {
		assert.Equal(t, tt.want, parseName(tt.in), tt.in)
	}
}

func TestReadPassesThrough(t *testing.T) {
	t.Parallel()
	for _, in := range []string{sample, strings.TrimSuffix(sample, "\n"), ""} {
		var out bytes.Buffer
		_, newline, err := read(strings.NewReader(in), &out)
		require.NoError(t, err)
		require.Equal(t, in, out.String())
		require.Equal(t, in == "" || strings.HasSuffix(in, "\n"), newline)
	}
}

func TestRead(t *testing.T) {
	t.Parallel()
	r, _, err := read(strings.NewReader(sample), new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, []float64{300, 310, 900}, r[key{"BenchmarkCycle/domains=1000", 1}]["ns/op"])
	assert.Equal(t, []float64{0, 0, 16}, r[key{"BenchmarkCycle/domains=1000", 1}]["B/op"])
	assert.Equal(t, []float64{100}, r[key{"BenchmarkCycle/domains=1000", 2}]["ns/op"])
	assert.Equal(t, []float64{0.0008}, r[key{"BenchmarkMemory/offsets/hole-every=0", 2}]["bytes/offset"])
	assert.Equal(t, []int{1, 2}, r.procs("BenchmarkFailRetry", "ns/op"))
	assert.Empty(t, r.procs("BenchmarkFailRetry", "bytes/domain"))
	for k := range r {
		assert.NotContains(t, k.name, "Broken")
	}

	m, ok := r.median(quantity{"BenchmarkCycle/domains=1000", 1, "ns/op"}) // odd count
	require.True(t, ok)
	assert.Equal(t, 310.0, m)
	m, ok = r.median(quantity{"BenchmarkCycleParallel/domains=100000", 1, "ns/op"}) // even count
	require.True(t, ok)
	assert.Equal(t, 410.0, m)
	_, ok = r.median(quantity{"BenchmarkCycleParallel/domains=100000", 4, "ns/op"})
	assert.False(t, ok)
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	r, _, err := read(strings.NewReader(sample), new(bytes.Buffer))
	require.NoError(t, err)
	got := make(map[string]verdict)
	for _, v := range evaluate(rows, r) {
		got[v.measure] = v
	}
	require.Len(t, got, len(rows), "measures are unique")

	type want struct {
		v        float64
		ran, met bool
	}
	for measure, w := range map[string]want{
		// Only cpu=2 ran: 150 / 50.
		"BenchmarkCycle/domains=1 ÷ BenchmarkFloorCycle/domains=1, ns/op": {3, true, false},
		// cpu=1 medians, 310 / 210; cpu=2 (100 / 999) is not used.
		"BenchmarkCycle/domains=1000 ÷ BenchmarkFloorCycle/domains=1000, ns/op": {310.0 / 210, true, true},
		// No floor at this size.
		"BenchmarkCycle/domains=100000 ÷ BenchmarkFloorCycle/domains=100000, ns/op": {0, false, false},
		// 700 / 600.
		"BenchmarkCycle/domains=1000000 ÷ BenchmarkFloorCycle/domains=1000000, ns/op": {700.0 / 600, true, true},
		// (700 - 310) / (600 - 210): the cpu=1 medians.
		"BenchmarkCycle/domains=1000000 − domains=1000 ÷ the same of BenchmarkFloorCycle, ns/op": {1, true, true},
		// 205 / 250.
		"BenchmarkCycleParallel/domains=100000 ÷ BenchmarkGlobalFloorParallel/domains=100000, ns/op at cpu=2": {0.82, true, false},
		// 410 / 205: a lower bound, met.
		"BenchmarkCycleParallel/domains=100000, ns/op at cpu=1 ÷ at cpu=2":      {2, true, true},
		"BenchmarkDeque/impl=backlog/depth=8 ÷ impl=slice/depth=8, ns/op":       {3.5, true, false},
		"BenchmarkDeque/impl=backlog/depth=1000 ÷ impl=slice/depth=1000, ns/op": {0, false, false},
		"BenchmarkMemory/idle-domains/domains=1000000, bytes/domain":            {250.5, true, true},
		"BenchmarkMemory/offsets/hole-every=0, bytes/1M-offsets":                {800, true, true},
		"BenchmarkMemory/offsets/hole-every=100, bytes/offset":                  {0.6, true, false},
		// domains=1-2 allocates 8 B/op; domains=1000's median is 0 despite
		// one run of 16; CycleParallel's 64 is another benchmark.
		"BenchmarkCycle, B/op":          {8, true, false},
		"BenchmarkFailRetry, B/op":      {0, true, true},
		"BenchmarkEnqueueHandOff, B/op": {0, false, false},
		"BenchmarkSucceedNext, B/op":    {0, true, true},
		// 150 / 200.
		"BenchmarkSucceedNext/domains=1000/impl=SucceedNext ÷ impl=Succeed+TryAcquire, ns/op": {0.75, true, true},
		// Custom units: 75000 / 3000 ops/s, a lower bound; 280 / 90 ns/op.
		"BenchmarkManagerDurable/callers=64 ÷ callers=1, ops/s":    {25, true, true},
		"BenchmarkManagerNoSync ÷ BenchmarkManagerInMemory, ns/op": {280.0 / 90, true, false},
		"BenchmarkManagerReplay, records/s":                        {4.3e6, true, true},
		// 6300 / 6000, a lower bound, met; 6300 (domains=1000's median,
		// the most) / 5000, an upper bound, missed.
		"BenchmarkPostgresCycle/domains=1000 ÷ BenchmarkPostgresSkipLocked, cycles/s": {1.05, true, true},
		// 760 / 800, a lower bound.
		"BenchmarkPostgresHotDomain/workers=16 ÷ workers=1, cycles/s": {0.95, true, true},
		// 3000 / 6000, a lower bound.
		"BenchmarkPostgresPullCycle/domains=1000 ÷ BenchmarkPostgresSkipLocked, cycles/s": {0.5, true, false},
		// 3600 / 3000, an upper bound.
		"BenchmarkPostgresPullCycle, most ÷ fewest cycles/s of domains=100, 1000, 10000": {1.2, true, true},
		// 4500 / 6000, reported with no target: never met.
		"BenchmarkPostgresPullNext ÷ BenchmarkPostgresSkipLocked, cycles/s": {0.75, true, false},
		// 20000 / 10000, a lower bound, met; 8000 / 10000, a lower bound,
		// missed; 9000 / 6000, an upper bound, missed.
		"BenchmarkPoolBurnDown/handler=none ÷ BenchmarkRiverBurnDown/handler=none, jobs/s":     {2, true, true},
		"BenchmarkPoolContinuous/handler=none ÷ BenchmarkRiverContinuous/handler=none, jobs/s": {0.8, true, false},
		"BenchmarkPoolContinuous/handler=none ÷ BenchmarkRiverContinuous/handler=none, p99-ms": {1.5, true, false},
		// 20000 / 25000, reported.
		"BenchmarkPoolBurnDown/handler=none ÷ BenchmarkFloorBurnDown, jobs/s":        {0.8, true, false},
		"BenchmarkPostgresCycle, most ÷ fewest cycles/s of domains=100, 1000, 10000": {1.26, true, false},
		// 50000 / 3125, a lower bound; 900 / 450, an upper bound.
		"BenchmarkKafka/handler=1ms/impl=parallel ÷ impl=per-partition, records/s": {16, true, true},
		"BenchmarkKafka/handler=none/impl=parallel ÷ impl=per-partition, ns/op":    {2, true, false},
	} {
		v, ok := got[measure]
		require.True(t, ok, "no row %q", measure)
		assert.Equal(t, w.ran, v.ran, measure)
		assert.Equal(t, w.met, v.met, measure)
		if w.ran {
			assert.InDelta(t, w.v, v.v, 1e-9, measure)
		}
	}
}

// A smoke run of one iteration (-benchtime=1x) reports no figures, which
// the Kafka benchmark suppresses below a minimum of records: its lines give
// no value, and its rows read "not run".
func TestSmokeRunMeasuresNothing(t *testing.T) {
	t.Parallel()
	const smoke = `BenchmarkKafka/handler=1ms/impl=parallel-2         	       1
BenchmarkKafka/handler=1ms/impl=per-partition-2    	       1
BenchmarkKafka/handler=none/impl=parallel-2        	       1
BenchmarkKafka/handler=none/impl=per-partition-2   	       1
`
	r, _, err := read(strings.NewReader(smoke), new(bytes.Buffer))
	require.NoError(t, err)
	assert.Empty(t, r)
	for _, v := range evaluate(rows, r) {
		assert.False(t, v.ran, v.measure)
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	r, _, err := read(strings.NewReader(sample), new(bytes.Buffer))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, write(&out, evaluate(rows, r)))
	lines := strings.Split(out.String(), "\n")
	require.Equal(t, "", lines[0], "a blank line separates the table from go test's output")
	require.Equal(t, "| Measure | Value | Target | Result | Meaning |", lines[1])
	table := out.String()
	for _, line := range []string{
		"| BenchmarkCycle/domains=1000 ÷ BenchmarkFloorCycle/domains=1000, ns/op | 1.48 | ≤ 1.5 | met | a cycle costs at most 1.5 times the least a correct one can |",
		"| BenchmarkCycleParallel/domains=100000, ns/op at cpu=1 ÷ at cpu=2 | 2.00 | ≥ 1.7 | met | two cores do at least 1.7 times the work of one |",
		"| BenchmarkDeque/impl=backlog/depth=1000 ÷ impl=slice/depth=1000, ns/op | – | ≤ 3 | not run | a backlog's pop and push cost at most 3 times a slice's |",
		"| BenchmarkMemory/offsets/hole-every=100, bytes/offset | 0.600 | ≤ 0.5 | not met | with a hole every 100 offsets, history costs at most half a byte per offset |",
		"| BenchmarkMemory/offsets/hole-every=0, bytes/1M-offsets | 800 | ≤ 1024 | met | a million offsets processed in order leave at most 1 KiB of history |",
		"| BenchmarkManagerReplay, records/s | 4300000 | ≥ 1000000 | met | a restart replays at least a million records a second |",
		"| BenchmarkPoolBurnDown/handler=none ÷ BenchmarkFloorBurnDown, jobs/s | 0.800 | – | reported | the Pool against a loop written by hand over the pg Manager's batch calls, the floor of what it can do |",
	} {
		assert.Contains(t, table, line+"\n")
	}
}

func TestWriteCurve(t *testing.T) {
	t.Parallel()
	r, _, err := read(strings.NewReader(sample), new(bytes.Buffer))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, writeCurve(&out, r))
	lines := strings.Split(out.String(), "\n")
	require.Greater(t, len(lines), 5)
	assert.Equal(t, "| Domains | Cycle, 1 core (ns) | Floor, 1 core (ns) | Cycle, 2 cores (ns) | Global floor, 2 cores (ns) | Idle domain (bytes) |", lines[1])
	// cpu=1 medians for the single-goroutine columns; the parallel ones at
	// cpu=2; a size the input lacks reads "–".
	assert.Equal(t, "| 1000 | 310 | 210 | 99.0 | – | 300 |", lines[3])
	assert.Equal(t, "| 100000 | 400 | – | 205 | 250 | – |", lines[4])
	assert.Equal(t, "| 1000000 | 700 | 600 | – | – | 250 |", lines[5])
}

func TestNumber(t *testing.T) {
	t.Parallel()
	for x, want := range map[float64]string{
		0:         "0",
		2:         "2.00",
		1.4762:    "1.48",
		0.0008:    "0.000800",
		312.5:     "312", // round half to even
		123456789: "123456789",
		-0.25:     "-0.250",
	} {
		assert.Equal(t, want, number(x), "%v", x)
	}
}

// TestEvaluateAgain checks that evaluating the rows leaves them as they were:
// the GOMAXPROCS a row picks from one input must not stick to the next.
func TestEvaluateAgain(t *testing.T) {
	t.Parallel()
	rs := []row{dequeRow(8)}
	at2, _, err := read(strings.NewReader(
		"BenchmarkDeque/impl=backlog/depth=8-2 1 12 ns/op\nBenchmarkDeque/impl=slice/depth=8-2 1 4 ns/op\n"), io.Discard)
	require.NoError(t, err)
	at1, _, err := read(strings.NewReader(
		"BenchmarkDeque/impl=backlog/depth=8 1 8 ns/op\nBenchmarkDeque/impl=slice/depth=8 1 4 ns/op\n"), io.Discard)
	require.NoError(t, err)
	assert.InDelta(t, 3.0, evaluate(rs, at2)[0].v, 1e-9)
	v := evaluate(rs, at1)[0]
	require.True(t, v.ran)
	assert.InDelta(t, 2.0, v.v, 1e-9)
}

// TestRewriteDoc checks that -doc replaces what stands between each pair
// of markers, keeping the markers and the rest of the file, and refuses a
// file without them.
func TestRewriteDoc(t *testing.T) {
	t.Parallel()
	doc := "# Performance\n\nBefore.\n\n<!-- benchtable:targets -->\nold targets\n<!-- /benchtable:targets -->\n\n" +
		"Between.\n\n<!-- benchtable:curve -->\n<!-- /benchtable:curve -->\n\nAfter.\n"
	got, err := rewriteDoc(doc, map[string]string{targetsMarker: "\n| new | targets |\n", curveMarker: "| curve |"})
	require.NoError(t, err)
	assert.Equal(t, "# Performance\n\nBefore.\n\n<!-- benchtable:targets -->\n| new | targets |\n<!-- /benchtable:targets -->\n\n"+
		"Between.\n\n<!-- benchtable:curve -->\n| curve |\n<!-- /benchtable:curve -->\n\nAfter.\n", got)
	again, err := rewriteDoc(got, map[string]string{targetsMarker: "\n| new | targets |\n", curveMarker: "| curve |"})
	require.NoError(t, err)
	assert.Equal(t, got, again, "rewriting with the same tables changes nothing")

	_, err = rewriteDoc("# Performance\n\n<!-- benchtable:targets -->\n", map[string]string{targetsMarker: "x"})
	assert.ErrorContains(t, err, "<!-- /benchtable:targets -->")
}

// TestUpdateDocOnlyAfterARun checks that main leaves the file as it is
// when no row of the targets table ran.
func TestUpdateDocOnlyAfterARun(t *testing.T) {
	t.Parallel()
	r, _, err := read(strings.NewReader("PASS\n"), io.Discard)
	require.NoError(t, err)
	assert.False(t, ranAny(evaluate(rows, r)))
	r, _, err = read(strings.NewReader(sample), io.Discard)
	require.NoError(t, err)
	assert.True(t, ranAny(evaluate(rows, r)))
}
