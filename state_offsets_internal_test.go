package worklease

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// members returns s's offsets in ascending order, nil if there are none.
func members(s *offsetSet) []int64 {
	var xs []int64
	for _, r := range s.runs() {
		for x := r.lo; ; x++ { // written so that x never passes math.MaxInt64
			xs = append(xs, x)
			if x == r.hi {
				break
			}
		}
	}
	return xs
}

// newOffsetSet adds xs to a new set and checks each was absent.
func newOffsetSet(t testing.TB, xs ...int64) *offsetSet {
	t.Helper()
	var s offsetSet
	for _, x := range xs {
		require.True(t, s.add(x), "add(%d)", x)
	}
	require.NoError(t, s.check())
	return &s
}

const maxOff = math.MaxInt64

func TestOffsetSetZero(t *testing.T) {
	t.Parallel()
	var s offsetSet
	require.NoError(t, s.check())
	assert.Zero(t, s.len())
	for _, x := range []int64{0, 1, maxOff, -1, math.MinInt64} {
		assert.False(t, s.contains(x), "contains(%d)", x)
	}
	assert.Empty(t, members(&s))
	assert.Nil(t, s.runs())
	assert.Equal(t, offsetSet{}, s)
}

// TestOffsetSetLen checks that len, which adds up the runs, counts every
// shape of set, up to the run of every offset, whose 2^63 members wrap to
// math.MinInt64 as raiseTo documents.
func TestOffsetSetLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		runs []offsetRun
		want int64
	}{
		{"empty", nil, 0},
		{"zero", []offsetRun{{0, 0}}, 1},
		{"max", []offsetRun{{maxOff, maxOff}}, 1},
		{"one run", []offsetRun{{3, 9}}, 7},
		{"runs", []offsetRun{{0, 1}, {5, 5}, {7, 10}}, 7},
		{"up to max", []offsetRun{{1, maxOff}}, maxOff},
		{"runs up to max", []offsetRun{{0, 0}, {2, maxOff}}, maxOff},
		{"every offset", []offsetRun{{0, maxOff}}, math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s offsetSet
			s.setRuns(slices.Clone(tt.runs))
			require.NoError(t, s.check())
			require.Equal(t, tt.runs, s.runs())
			assert.Equal(t, tt.want, s.len())
			assert.Equal(t, len(tt.runs), s.numRuns())
			assert.Equal(t, len(tt.runs) == 0, s.isEmpty())
		})
	}
}

func TestOffsetSetAdd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		start    []int64 // added first, each expected to be absent
		x        int64
		added    bool
		wantRuns []offsetRun
	}{
		{"first offset", nil, 5, true, []offsetRun{{5, 5}}},
		{"zero", nil, 0, true, []offsetRun{{0, 0}}},
		{"max", nil, maxOff, true, []offsetRun{{maxOff, maxOff}}},
		{"extends the last run", []int64{5}, 6, true, []offsetRun{{5, 6}}},
		{"new run after a gap", []int64{5}, 7, true, []offsetRun{{5, 5}, {7, 7}}},
		{"new run far after", []int64{5}, maxOff, true, []offsetRun{{5, 5}, {maxOff, maxOff}}},
		{"new run before the first", []int64{5}, 3, true, []offsetRun{{3, 3}, {5, 5}}},
		{"new run at zero", []int64{5}, 0, true, []offsetRun{{0, 0}, {5, 5}}},
		{"new run between", []int64{1, 9}, 5, true, []offsetRun{{1, 1}, {5, 5}, {9, 9}}},
		{"merges with next only", []int64{5, 6, 9}, 4, true, []offsetRun{{4, 6}, {9, 9}}},
		{"merges with next at zero", []int64{1, 2}, 0, true, []offsetRun{{0, 2}}},
		{"merges with previous only", []int64{5, 6, 9}, 7, true, []offsetRun{{5, 7}, {9, 9}}},
		{"merges with previous and next", []int64{1, 2, 4, 5, 9}, 3, true, []offsetRun{{1, 5}, {9, 9}}},
		{"merges the last two runs", []int64{1, 3}, 2, true, []offsetRun{{1, 3}}},
		{"merges up to max", []int64{maxOff}, maxOff - 1, true, []offsetRun{{maxOff - 1, maxOff}}},
		{"reaches max through the fast path", []int64{maxOff - 1}, maxOff, true, []offsetRun{{maxOff - 1, maxOff}}},
		{"fills the gap below max", []int64{maxOff - 2, maxOff}, maxOff - 1, true, []offsetRun{{maxOff - 2, maxOff}}},
		{"duplicate in the last run", []int64{5, 6, 7}, 6, false, []offsetRun{{5, 7}}},
		{"duplicate at the end of the last run", []int64{5, 6, 7}, 7, false, []offsetRun{{5, 7}}},
		{"duplicate at the start of the last run", []int64{5, 6, 7}, 5, false, []offsetRun{{5, 7}}},
		{"duplicate in an earlier run", []int64{1, 2, 3, 9}, 2, false, []offsetRun{{1, 3}, {9, 9}}},
		{"duplicate zero", []int64{0, 9}, 0, false, []offsetRun{{0, 0}, {9, 9}}},
		{"duplicate max", []int64{0, maxOff}, maxOff, false, []offsetRun{{0, 0}, {maxOff, maxOff}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newOffsetSet(t, tt.start...)
			n := s.len()
			require.Equal(t, tt.added, s.add(tt.x))
			require.NoError(t, s.check())
			assert.Equal(t, tt.wantRuns, s.runs())
			assert.True(t, s.contains(tt.x))
			if tt.added {
				n++
			}
			assert.Equal(t, n, s.len())
		})
	}
}

func TestOffsetSetContains(t *testing.T) {
	t.Parallel()
	s := newOffsetSet(t, 0, 1, 2, 10, 20, 21, maxOff-1, maxOff)
	tests := []struct {
		x    int64
		want bool
	}{
		{math.MinInt64, false}, {-1, false}, {0, true}, {2, true}, {3, false},
		{9, false}, {10, true}, {11, false}, {19, false}, {20, true}, {21, true},
		{22, false}, {maxOff - 2, false}, {maxOff - 1, true}, {maxOff, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.x), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, s.contains(tt.x))
			assert.False(t, s.pastEnd(tt.x) && tt.x >= 0, "no offset is past maxOff")
		})
	}
	assert.True(t, s.pastEnd(-1), "a negative offset is past the end, as unsigned")
	low := newOffsetSet(t, 0, 1, 2, 10)
	assert.False(t, low.pastEnd(10))
	assert.True(t, low.pastEnd(11))
	assert.True(t, new(offsetSet).pastEnd(0), "every offset is past the end of an empty set")
}

func TestOffsetSetMembers(t *testing.T) {
	t.Parallel()
	s := newOffsetSet(t, 9, 0, 5, 1, 6, 2)
	assert.Equal(t, []int64{0, 1, 2, 5, 6, 9}, members(s), "ascending across runs")
	s = newOffsetSet(t, maxOff-2, maxOff-1, maxOff)
	assert.Equal(t, []int64{maxOff - 2, maxOff - 1, maxOff}, members(s), "up to max without overflow")
}

func TestOffsetSetInOrderMillion(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	var s offsetSet
	for x := range int64(n) {
		if !s.add(x) {
			t.Fatalf("add(%d) = false", x)
		}
	}
	require.NoError(t, s.check())
	require.Equal(t, []offsetRun{{0, n - 1}}, s.runs(), "in-order adds are one run")
	assert.Equal(t, int64(n), s.len())
	assert.Nil(t, s.earlier, "the one run is held in the set itself")
	assert.True(t, s.contains(0))
	assert.True(t, s.contains(n-1))
	assert.False(t, s.contains(n))
}

func TestOffsetSetRaiseTo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		start []int64 // added first
		x     int64
		want  offsetRun
	}{
		{"empty, to zero", nil, 0, offsetRun{0, 0}},
		{"empty, to a sparse offset", nil, 41, offsetRun{0, 41}},
		{"raises the run", []int64{0, 1, 2}, 9, offsetRun{0, 9}},
		{"below the run changes nothing", []int64{0, 1, 2, 3}, 1, offsetRun{0, 3}},
		{"absorbs sparse runs", []int64{3, 7, 8, 20}, 10, offsetRun{0, 20}},
		{"to max", []int64{5}, maxOff, offsetRun{0, maxOff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newOffsetSet(t, tt.start...)
			s.raiseTo(tt.x)
			require.NoError(t, s.check())
			require.Equal(t, []offsetRun{tt.want}, s.runs())
			assert.Nil(t, s.earlier, "no runs kept below the one")
			assert.True(t, s.contains(0))
			assert.True(t, s.contains(tt.want.hi))
			if tt.want.hi < maxOff {
				assert.False(t, s.contains(tt.want.hi+1))
				assert.Equal(t, tt.want.hi+1, s.len())
			}
		})
	}
}

// TestOffsetSetRaiseToSparse raises the run through a million sparse
// offsets: one run, however sparse, and no allocation.
func TestOffsetSetRaiseToSparse(t *testing.T) { // not parallel: AllocsPerRun
	var s offsetSet
	allocs := testing.AllocsPerRun(1, func() {
		s.raiseTo(0)
		for x := int64(7); x <= 7_000_000; x += 7 {
			s.raiseTo(x)
		}
	})
	assert.Zero(t, allocs)
	require.NoError(t, s.check())
	require.Equal(t, []offsetRun{{0, 7_000_000}}, s.runs())
}

// TestOffsetSetMemory checks that the set costs memory in proportion to its
// holes: a million offsets with 1% of them missing at random cost at most
// half a byte per offset held.
func TestOffsetSetMemory(t *testing.T) {
	t.Parallel()
	const (
		n          = 1_000_000
		runBytes   = 16 // unsafe.Sizeof(offsetRun{})
		maxPerElem = 0.5
	)
	holes := make(map[int64]bool)
	rng := rand.New(rand.NewPCG(1, 2))
	for len(holes) < n/100 {
		holes[rng.Int64N(n)] = true
	}
	var s offsetSet // in-order adds, skipping the holes
	for x := range int64(n) {
		if !holes[x] && !s.add(x) {
			t.Fatalf("add(%d) = false", x)
		}
	}
	require.NoError(t, s.check())
	require.Equal(t, int64(n-len(holes)), s.len())
	require.LessOrEqual(t, s.numRuns(), len(holes)+1)
	perOffset := float64((cap(s.below())+1)*runBytes) / float64(s.len())
	t.Logf("%d runs, capacity %d: %.3f bytes per offset", s.numRuns(), cap(s.below())+1, perOffset)
	assert.LessOrEqual(t, perOffset, maxPerElem, "%d runs, capacity %d", s.numRuns(), cap(s.below())+1)
}

// offsetModel is the reference: a plain map.
type offsetModel map[int64]bool

// past reports whether x is above every member.
func (m offsetModel) past(x int64) bool {
	for y := range m {
		if y >= x {
			return false
		}
	}
	return true
}

func (m offsetModel) sorted() []int64 {
	var xs []int64 // nil when empty, like members
	for x := range m {
		xs = append(xs, x)
	}
	slices.Sort(xs)
	return xs
}

// applyOffsetOp applies one op to s and m, and checks they agree and that s's
// representation is sound.
func applyOffsetOp(s *offsetSet, m offsetModel, op int, x int64) error {
	var desc string
	var got, want bool
	switch op {
	case 0:
		desc = fmt.Sprintf("add(%d)", x)
		got, want = s.add(x), !m[x]
		m[x] = true
	default:
		desc = fmt.Sprintf("contains(%d)", x)
		got, want = s.contains(x), m[x]
	}
	if got != want {
		return fmt.Errorf("%s = %t, want %t", desc, got, want)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("after %s: %w", desc, err)
	}
	if s.len() != int64(len(m)) {
		return fmt.Errorf("after %s: len = %d, want %d", desc, s.len(), len(m))
	}
	if s.contains(x) != m[x] {
		return fmt.Errorf("after %s: contains(%d) = %t", desc, x, s.contains(x))
	}
	if s.pastEnd(x) != m.past(x) {
		return fmt.Errorf("after %s: pastEnd(%d) = %t", desc, x, s.pastEnd(x))
	}
	return nil
}

// TestOffsetSetModel drives the set and a map with the same operations,
// checking the set's representation after each. Offsets come from a small
// range near 0 and a smaller one just below math.MaxInt64, so runs merge and
// split often and the extremes are exercised.
func TestOffsetSetModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var s offsetSet
		m := offsetModel{}
		offset := rapid.OneOf(
			rapid.Int64Range(0, 40),
			rapid.Map(rapid.Int64Range(0, 4), func(d int64) int64 { return maxOff - d }),
		)
		apply := func(t *rapid.T, op int, x int64) {
			if err := applyOffsetOp(&s, m, op, x); err != nil {
				t.Fatal(err)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"add":      func(t *rapid.T) { apply(t, 0, offset.Draw(t, "x")) },
			"contains": func(t *rapid.T) { apply(t, 1, offset.Draw(t, "x")) },
			"addRun": func(t *rapid.T) {
				lo := rapid.Int64Range(0, 40).Draw(t, "lo")
				k := rapid.Int64Range(0, 20).Draw(t, "k")
				down := rapid.Bool().Draw(t, "down")
				for i := range k {
					x := lo + i
					if down {
						x = lo + k - 1 - i
					}
					apply(t, 0, x)
				}
			},
			"": func(t *rapid.T) {
				require.NoError(t, s.check())
				require.Equal(t, m.sorted(), members(&s))
			},
		})
	})
}

// TestOffsetSetRandomWalk complements TestOffsetSetModel with long, seeded
// random sequences of adds and lookups, over ranges small enough that runs
// merge often, with offsets near math.MaxInt64 mixed in.
func TestOffsetSetRandomWalk(t *testing.T) {
	t.Parallel()
	steps := 20000
	if testing.Short() {
		steps = 2000
	}
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0x0ff5e7))
			var s offsetSet
			m := offsetModel{}
			span := int64(16)
			addBias := 50
			for step := range steps {
				if step%1000 == 0 { // new phase
					span = []int64{4, 16, 64, 256}[rng.IntN(4)]
					addBias = []int{30, 50, 70, 90}[rng.IntN(4)]
				}
				x := rng.Int64N(span)
				if rng.IntN(4) == 0 { // near the top of the range
					x = maxOff - x
				}
				op := 1
				if rng.IntN(100) < addBias {
					op = 0
				}
				if err := applyOffsetOp(&s, m, op, x); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if step%100 == 0 {
					require.Equal(t, m.sorted(), members(&s), "step %d", step)
				}
			}
			require.Equal(t, m.sorted(), members(&s))
		})
	}
}

// FuzzOffsetSet decodes each input byte as one op on a small range of
// offsets: the top two bits pick add (0, 1, 2) or contains (3), and the low
// six bits the offset, with 62 and 63 standing for math.MaxInt64-1 and
// math.MaxInt64.
func FuzzOffsetSet(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0x82})            // in order, then a split
	f.Add([]byte{5, 3, 4, 0x84, 0x83, 0x85})   // merge both ways, then empty
	f.Add([]byte{63, 62, 61, 0x80 | 62, 0xc0}) // near max
	f.Add([]byte{0x3f, 0, 0x80, 0xbf, 0xff})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var s offsetSet
		m := offsetModel{}
		for i, b := range ops {
			x := int64(b & 0x3f)
			if x >= 62 {
				x = maxOff - (63 - x)
			}
			op := 0
			if b>>6 == 3 {
				op = 1
			}
			if err := applyOffsetOp(&s, m, op, x); err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
		}
		require.Equal(t, m.sorted(), members(&s))
	})
}

func BenchmarkOffsetSetAddInOrder(b *testing.B) {
	var s offsetSet
	b.ReportAllocs()
	x := int64(0)
	for b.Loop() {
		s.add(x)
		x++
	}
}
