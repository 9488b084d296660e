package worklease

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// checkBacklog checks b's representation and that it holds exactly want,
// front first.
func checkBacklog(t testing.TB, b *backlog, want []int64) {
	t.Helper()
	require.NoError(t, backlogCheck(b, want))
}

// backlogCheck is checkBacklog's body; it returns the first violation.
func backlogCheck(b *backlog, want []int64) error {
	if b.len() != len(want) {
		return fmt.Errorf("len = %d, want %d", b.len(), len(want))
	}
	if got := b.appendTo(nil); !slices.Equal(got, want) {
		return fmt.Errorf("appendTo = %v, want %v", got, want)
	}
	if len(b.buf) != 0 && bits.OnesCount(uint(len(b.buf))) != 1 {
		return fmt.Errorf("len(buf) = %d, not zero or a power of two", len(b.buf))
	}
	if b.n > len(b.buf) || b.head < 0 || (len(b.buf) > 0 && b.head >= len(b.buf)) {
		return fmt.Errorf("n = %d, head = %d, len(buf) = %d", b.n, b.head, len(b.buf))
	}
	x, ok := b.front()
	switch {
	case len(want) == 0 && (ok || x != 0):
		return fmt.Errorf("front of empty backlog = %d, %t", x, ok)
	case len(want) > 0 && (!ok || x != want[0]):
		return fmt.Errorf("front = %d, %t; want %d", x, ok, want[0])
	}
	for _, x := range want {
		if !b.contains(x) {
			return fmt.Errorf("contains(%d) = false for a member", x)
		}
	}
	if err := b.check(); err != nil {
		return err
	}
	if b.n == 0 && (b.index != nil || b.head != 0) {
		return fmt.Errorf("empty backlog keeps index %v, head %d", b.index, b.head)
	}
	if b.n == 0 && len(b.buf) > keepBacklogCap {
		return fmt.Errorf("empty backlog keeps a buffer of %d > %d", len(b.buf), keepBacklogCap)
	}
	if b.index != nil {
		if len(b.index) != b.n {
			return fmt.Errorf("index has %d entries for %d offsets", len(b.index), b.n)
		}
		for _, x := range want {
			if _, ok := b.index[x]; !ok {
				return fmt.Errorf("index misses %d", x)
			}
		}
	}
	return nil
}

// fill pushes xs at the back of a new backlog and checks each was added.
func fill(t testing.TB, xs ...int64) *backlog {
	t.Helper()
	var b backlog
	for _, x := range xs {
		require.True(t, b.pushBack(x), "pushBack(%d)", x)
	}
	return &b
}

// seq returns [lo, hi).
func seq(lo, hi int64) []int64 {
	s := make([]int64, 0, hi-lo)
	for x := lo; x < hi; x++ {
		s = append(s, x)
	}
	return s
}

func TestBacklogZero(t *testing.T) {
	t.Parallel()
	var b backlog
	checkBacklog(t, &b, nil)
	assert.False(t, b.contains(0))
	_, ok := b.popFront()
	assert.False(t, ok)
	assert.False(t, b.remove(0))
	assert.Nil(t, b.appendTo(nil))
	assert.Nil(t, b.buf, "no operation but a push may allocate")
	assert.Nil(t, b.index)
}

func TestBacklogOps(t *testing.T) {
	t.Parallel()
	type op struct {
		name string // pushBack, pushFront, popFront, remove
		x    int64  // argument, or the offset popFront must return
		ok   bool   // the op's boolean result
	}
	tests := []struct {
		name string
		ops  []op
		want []int64
	}{
		{"pushBack keeps FIFO order", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"pushBack", 3, true}}, []int64{1, 2, 3}},
		{"pushBack drops a duplicate", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"pushBack", 1, false}, {"pushBack", 2, false}}, []int64{1, 2}},
		{"pushFront goes first", []op{{"pushBack", 1, true}, {"pushFront", 2, true}, {"pushFront", 3, true}}, []int64{3, 2, 1}},
		{"pushFront drops a duplicate at the back", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"pushFront", 2, false}}, []int64{1, 2}},
		{"pushBack drops a duplicate at the front", []op{{"pushFront", 7, true}, {"pushBack", 7, false}}, []int64{7}},
		{"pushFront on empty", []op{{"pushFront", 5, true}}, []int64{5}},
		{"popFront returns the front", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"popFront", 1, true}}, []int64{2}},
		{"popFront on empty", []op{{"popFront", 0, false}}, nil},
		{"popFront empties", []op{{"pushBack", 1, true}, {"popFront", 1, true}, {"popFront", 0, false}}, nil},
		{"popped offset may return", []op{{"pushBack", 1, true}, {"popFront", 1, true}, {"pushBack", 1, true}}, []int64{1}},
		{"remove front", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"pushBack", 3, true}, {"remove", 1, true}}, []int64{2, 3}},
		{"remove middle keeps order", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"pushBack", 3, true}, {"remove", 2, true}}, []int64{1, 3}},
		{"remove back", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"pushBack", 3, true}, {"remove", 3, true}}, []int64{1, 2}},
		{"remove absent", []op{{"pushBack", 1, true}, {"remove", 2, false}}, []int64{1}},
		{"remove from empty", []op{{"remove", 0, false}}, nil},
		{"remove last member", []op{{"pushBack", 1, true}, {"remove", 1, true}}, nil},
		{"removed offset may return", []op{{"pushBack", 1, true}, {"pushBack", 2, true}, {"remove", 1, true}, {"pushBack", 1, true}}, []int64{2, 1}},
		{"zero and extreme offsets", []op{{"pushBack", 0, true}, {"pushBack", 1<<63 - 1, true}, {"pushFront", 0, false}, {"pushFront", 1<<63 - 1, false}}, []int64{0, 1<<63 - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b backlog
			for i, o := range tt.ops {
				var ok bool
				switch o.name {
				case "pushBack":
					ok = b.pushBack(o.x)
				case "pushFront":
					ok = b.pushFront(o.x)
				case "remove":
					ok = b.remove(o.x)
				case "popFront":
					var x int64
					x, ok = b.popFront()
					require.Equal(t, o.x, x, "op %d: popFront value", i)
				default:
					t.Fatalf("unknown op %q", o.name)
				}
				require.Equal(t, o.ok, ok, "op %d: %s(%d)", i, o.name, o.x)
			}
			checkBacklog(t, &b, tt.want)
		})
	}
}

func TestBacklogWrapAround(t *testing.T) {
	t.Parallel()
	t.Run("pushBack wraps the tail", func(t *testing.T) {
		t.Parallel()
		b := fill(t, 1, 2, 3, 4)
		require.Len(t, b.buf, 4)
		for _, want := range []int64{1, 2} {
			x, ok := b.popFront()
			require.True(t, ok)
			require.Equal(t, want, x)
		}
		require.True(t, b.pushBack(5))
		require.True(t, b.pushBack(6))
		require.Len(t, b.buf, 4, "no growth while there is room")
		require.Equal(t, 2, b.head)
		checkBacklog(t, b, []int64{3, 4, 5, 6})
		require.False(t, b.pushBack(5), "de-duplication scans across the seam")
		require.False(t, b.pushFront(3))
		require.True(t, b.remove(4), "remove shifts across the seam")
		checkBacklog(t, b, []int64{3, 5, 6})
		require.True(t, b.pushBack(7))
		checkBacklog(t, b, []int64{3, 5, 6, 7})
	})
	t.Run("pushFront wraps the head", func(t *testing.T) {
		t.Parallel()
		b := fill(t, 1, 2)
		require.True(t, b.pushFront(0))
		require.Equal(t, 3, b.head, "head wraps from 0 to the end of the ring")
		require.True(t, b.pushFront(-1))
		require.Len(t, b.buf, 4)
		checkBacklog(t, b, []int64{-1, 0, 1, 2})
		require.True(t, b.remove(2))
		require.True(t, b.remove(-1))
		checkBacklog(t, b, []int64{0, 1})
	})
	t.Run("growth unwraps", func(t *testing.T) {
		t.Parallel()
		b := fill(t, 1, 2, 3, 4)
		_, _ = b.popFront()
		_, _ = b.popFront()
		require.True(t, b.pushBack(5))
		require.True(t, b.pushBack(6)) // ring is full and wrapped: [5 6 3 4], head 2
		require.True(t, b.pushBack(7))
		require.Len(t, b.buf, 8)
		require.Equal(t, 0, b.head)
		checkBacklog(t, b, []int64{3, 4, 5, 6, 7})
	})
	t.Run("head cycles many times", func(t *testing.T) {
		t.Parallel()
		var b backlog
		var want []int64
		for x := range int64(1000) {
			require.True(t, b.pushBack(x))
			want = append(want, x)
			if len(want) == 3 {
				got, ok := b.popFront()
				require.True(t, ok)
				require.Equal(t, want[0], got)
				want = want[1:]
			}
			checkBacklog(t, &b, want)
		}
		require.Len(t, b.buf, 4, "a backlog of at most 3 never grows past 4")
	})
}

func TestBacklogGrowth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		front bool // push at the front instead of the back
	}{
		{"pushBack", false},
		{"pushFront", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b backlog
			var want []int64
			for x := range int64(1000) {
				if tt.front {
					require.True(t, b.pushFront(x))
					want = slices.Insert(want, 0, x)
				} else {
					require.True(t, b.pushBack(x))
					want = append(want, x)
				}
				require.Equal(t, max(4, 1<<bits.Len(uint(len(want)-1))), len(b.buf),
					"ring doubles only when full, from 4")
			}
			checkBacklog(t, &b, want)
		})
	}
}

func TestBacklogIndex(t *testing.T) {
	t.Parallel()
	t.Run("none while offsets arrive in order", func(t *testing.T) {
		t.Parallel()
		want := seq(0, 3*smallBacklog)
		b := fill(t, want...)
		require.Nil(t, b.index, "a sorted backlog is searched")
		require.False(t, b.unordered)
		require.False(t, b.pushBack(5), "de-duplication by binary search")
		require.False(t, b.pushFront(20))
		require.True(t, b.pushFront(-1), "below the front: still in order")
		require.Nil(t, b.index)
		checkBacklog(t, b, append([]int64{-1}, want...))
	})
	t.Run("built past smallBacklog by an out-of-order pushBack", func(t *testing.T) {
		t.Parallel()
		b := fill(t, seq(1, smallBacklog+1)...)
		require.Nil(t, b.index)
		require.True(t, b.pushBack(0))
		require.True(t, b.unordered)
		require.NotNil(t, b.index)
		checkBacklog(t, b, append(seq(1, smallBacklog+1), 0))
	})
	t.Run("built past smallBacklog by an out-of-order pushFront", func(t *testing.T) {
		t.Parallel()
		b := fill(t, seq(0, smallBacklog)...)
		require.True(t, b.pushFront(100))
		require.NotNil(t, b.index)
		checkBacklog(t, b, append([]int64{100}, seq(0, smallBacklog)...))
	})
	t.Run("small unordered backlogs are scanned", func(t *testing.T) {
		t.Parallel()
		b := fill(t, 5, 3, 4)
		require.True(t, b.unordered)
		require.Nil(t, b.index)
		require.False(t, b.pushBack(3), "de-duplication by scanning")
		checkBacklog(t, b, []int64{5, 3, 4})
	})
	t.Run("kept consistent while shrinking and dropped when empty", func(t *testing.T) {
		t.Parallel()
		want := append(seq(1, 3*smallBacklog), 0)
		b := fill(t, want...)
		require.NotNil(t, b.index)
		require.False(t, b.pushBack(5), "de-duplication through the index")
		require.False(t, b.pushFront(20))
		require.False(t, b.remove(1000))
		require.True(t, b.remove(10))
		want = slices.DeleteFunc(want, func(x int64) bool { return x == 10 })
		checkBacklog(t, b, want)
		for len(want) > 0 {
			x, ok := b.popFront()
			require.True(t, ok)
			require.Equal(t, want[0], x)
			want = want[1:]
			require.False(t, b.contains(x), "popped %d still indexed", x)
			if len(want) > 0 {
				require.NotNil(t, b.index, "the index is kept until the backlog empties")
			}
			checkBacklog(t, b, want)
		}
		require.Nil(t, b.index)
		require.False(t, b.unordered, "an empty backlog is in order")
	})
	t.Run("dropped when emptied by remove", func(t *testing.T) {
		t.Parallel()
		want := append(seq(1, smallBacklog+1), 0)
		b := fill(t, want...)
		for _, x := range want {
			require.True(t, b.remove(x))
		}
		require.Nil(t, b.index)
		checkBacklog(t, b, nil)
	})
	t.Run("rebuilt after refill", func(t *testing.T) {
		t.Parallel()
		b := fill(t, append(seq(1, 2*smallBacklog), 0)...)
		for b.len() > 0 {
			_, _ = b.popFront()
		}
		require.Nil(t, b.index)
		for _, x := range seq(100, 100+smallBacklog) {
			require.True(t, b.pushBack(x))
		}
		require.Nil(t, b.index, "a refilled backlog in order needs no index")
		require.False(t, b.contains(0), "no stale members")
		require.True(t, b.pushBack(0))
		require.NotNil(t, b.index)
		checkBacklog(t, b, append(seq(100, 100+smallBacklog), 0))
	})
}

func TestBacklogKeepCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		n       int64 // offsets pushed
		bufLen  int   // ring size once they are in
		kept    bool  // whether the emptied backlog keeps its ring
		byPop   bool  // empty with popFront rather than remove
		wrapped bool  // pop one and push one first, so the ring's head is not 0
	}{
		{"small ring kept after popFront", 3, 4, true, true, false},
		{"ring of keepBacklogCap kept after popFront", keepBacklogCap, keepBacklogCap, true, true, false},
		{"ring of keepBacklogCap kept after remove", keepBacklogCap, keepBacklogCap, true, false, true},
		{"bigger ring released after popFront", keepBacklogCap + 1, 2 * keepBacklogCap, false, true, true},
		{"bigger ring released after remove", keepBacklogCap + 1, 2 * keepBacklogCap, false, false, false},
		{"huge ring released", 10000, 16384, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := seq(0, tt.n)
			b := fill(t, want...)
			if tt.wrapped {
				_, _ = b.popFront()
				require.True(t, b.pushBack(tt.n))
				want = append(want[1:], tt.n)
			}
			require.Len(t, b.buf, tt.bufLen)
			checkBacklog(t, b, want)
			for _, x := range want {
				if tt.byPop {
					got, ok := b.popFront()
					require.True(t, ok)
					require.Equal(t, x, got)
				} else {
					require.True(t, b.remove(x))
				}
			}
			checkBacklog(t, b, nil)
			if tt.kept {
				assert.Len(t, b.buf, tt.bufLen)
			} else {
				assert.Nil(t, b.buf)
			}
			require.True(t, b.pushBack(42), "usable after emptying")
			checkBacklog(t, b, []int64{42})
		})
	}
}

// backlogModel is the reference: a plain slice, front first.
type backlogModel []int64

func (m *backlogModel) pushBack(x int64) bool {
	if slices.Contains(*m, x) {
		return false
	}
	*m = append(*m, x)
	return true
}

func (m *backlogModel) pushFront(x int64) bool {
	if slices.Contains(*m, x) {
		return false
	}
	*m = slices.Insert(*m, 0, x)
	return true
}

func (m *backlogModel) popFront() (int64, bool) {
	if len(*m) == 0 {
		return 0, false
	}
	x := (*m)[0]
	*m = (*m)[1:]
	return x, true
}

func (m *backlogModel) remove(x int64) bool {
	i := slices.Index(*m, x)
	if i < 0 {
		return false
	}
	*m = slices.Delete(*m, i, i+1)
	return true
}

// TestBacklogModel drives the backlog and a plain slice with the same
// operations, checking the backlog's representation after each. The bulk
// actions move it across smallBacklog and keepBacklogCap in both directions.
func TestBacklogModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var b backlog
		var m backlogModel
		offset := rapid.Int64Range(0, 20) // small, so pushes collide
		t.Repeat(map[string]func(*rapid.T){
			"pushBack": func(t *rapid.T) {
				x := offset.Draw(t, "x")
				require.Equal(t, m.pushBack(x), b.pushBack(x), "pushBack(%d)", x)
			},
			"pushFront": func(t *rapid.T) {
				x := offset.Draw(t, "x")
				require.Equal(t, m.pushFront(x), b.pushFront(x), "pushFront(%d)", x)
			},
			"popFront": func(t *rapid.T) {
				wx, wok := m.popFront()
				gx, gok := b.popFront()
				require.Equal(t, wok, gok)
				require.Equal(t, wx, gx)
			},
			"remove": func(t *rapid.T) {
				x := offset.Draw(t, "x")
				require.Equal(t, m.remove(x), b.remove(x), "remove(%d)", x)
			},
			"contains": func(t *rapid.T) {
				x := offset.Draw(t, "x")
				require.Equal(t, slices.Contains(m, x), b.contains(x), "contains(%d)", x)
			},
			"pushMany": func(t *rapid.T) {
				lo := rapid.Int64Range(0, 200).Draw(t, "lo")
				k := rapid.Int64Range(0, 2*keepBacklogCap).Draw(t, "k")
				front := rapid.Bool().Draw(t, "front")
				for x := lo; x < lo+k; x++ {
					if front {
						require.Equal(t, m.pushFront(x), b.pushFront(x), "pushFront(%d)", x)
					} else {
						require.Equal(t, m.pushBack(x), b.pushBack(x), "pushBack(%d)", x)
					}
				}
			},
			"popMany": func(t *rapid.T) {
				for range rapid.IntRange(0, 2*keepBacklogCap).Draw(t, "k") {
					wx, wok := m.popFront()
					gx, gok := b.popFront()
					require.Equal(t, wok, gok)
					require.Equal(t, wx, gx)
				}
			},
			"": func(t *rapid.T) {
				if err := backlogCheck(&b, m); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
}

// TestBacklogRandomWalk complements TestBacklogModel with long, seeded
// random sequences. Phases alternate between growing and shrinking over value
// ranges of several sizes, so the backlog crosses smallBacklog and
// keepBacklogCap in both directions and its ring wraps at every size.
func TestBacklogRandomWalk(t *testing.T) {
	t.Parallel()
	steps := 20000
	if testing.Short() {
		steps = 2000
	}
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			var b backlog
			var m backlogModel
			var span int64 = 4
			pushBias := 50 // percent of steps that push
			for step := range steps {
				if step%500 == 0 { // new phase
					span = []int64{4, 12, 40, 100, 300}[rng.IntN(5)]
					pushBias = []int{20, 50, 80}[rng.IntN(3)]
				}
				x := rng.Int64N(span)
				var desc string
				var got, want bool
				switch r := rng.IntN(100); {
				case r < pushBias*2/3:
					desc = fmt.Sprintf("pushBack(%d)", x)
					got, want = b.pushBack(x), m.pushBack(x)
				case r < pushBias:
					desc = fmt.Sprintf("pushFront(%d)", x)
					got, want = b.pushFront(x), m.pushFront(x)
				case r < pushBias+(100-pushBias)*2/3:
					desc = "popFront()"
					gx, gok := b.popFront()
					wx, wok := m.popFront()
					require.Equal(t, wx, gx, "step %d: %s value", step, desc)
					got, want = gok, wok
				case r < 95:
					desc = fmt.Sprintf("remove(%d)", x)
					got, want = b.remove(x), m.remove(x)
				default:
					desc = fmt.Sprintf("contains(%d)", x)
					got, want = b.contains(x), slices.Contains(m, x)
				}
				require.Equal(t, want, got, "step %d: %s", step, desc)
				if err := backlogCheck(&b, m); err != nil {
					t.Fatalf("step %d: after %s: %v", step, desc, err)
				}
			}
		})
	}
}

// TestBacklogAllocs is not parallel: testing.AllocsPerRun counts every
// goroutine's allocations.
func TestBacklogAllocs(t *testing.T) {
	t.Run("zero backlog allocates nothing until the first push", func(t *testing.T) {
		var b backlog
		allocs := testing.AllocsPerRun(100, func() {
			_ = b.len()
			_, _ = b.front()
			_ = b.contains(1)
			_, _ = b.popFront()
			_ = b.remove(1)
			_ = b.appendTo(nil)
		})
		assert.Zero(t, allocs)
		assert.Nil(t, b.buf)
		assert.Nil(t, b.index)
		b.pushBack(1)
		assert.NotNil(t, b.buf)
	})
	tests := []struct {
		name  string
		depth int64 // offsets held between each push and pop
	}{
		{"empty between push and pop", 0},
		{"shallow", 3},
		{"at smallBacklog", smallBacklog - 1},
		{"indexed", 4 * smallBacklog},
	}
	for _, tt := range tests {
		t.Run("steady pushBack and popFront "+tt.name, func(t *testing.T) {
			var b backlog
			next := int64(0)
			for range tt.depth {
				b.pushBack(next)
				next++
			}
			step := func() {
				b.pushBack(next)
				next++
				if _, ok := b.popFront(); !ok {
					panic("empty backlog")
				}
			}
			for range 100 { // warm up: the ring reaches its size
				step()
			}
			assert.Zero(t, testing.AllocsPerRun(1000, step))
			require.Equal(t, int(tt.depth), b.len())
		})
	}
}

func BenchmarkBacklogPushPop(b *testing.B) {
	for _, depth := range []int64{0, 4, 64, 4096} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			var q backlog
			next := int64(0)
			for range depth {
				q.pushBack(next)
				next++
			}
			b.ReportAllocs()
			for b.Loop() {
				q.pushBack(next)
				next++
				q.popFront()
			}
		})
	}
}
