package worklease

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestDomainMapModel drives a domainMap against a plain map. The hashes
// come from a handful of values, so names collide all the time, and their
// top bits put homes at both ends of the table, so runs wrap around. The
// names are short, or of 7 to 17 bytes from two letters, so that names of
// the lengths get compares in place (8 to 16) differ in any byte, and the
// lengths around them take the other way.
func TestDomainMapModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var d domainMap
		model := map[string]*domainRecord{}
		hashes := []uint64{0, 1, 1 << 62, 3 << 62, ^uint64(0), ^uint64(0) - 1}
		hash := func(name string) uint64 { return hashes[(len(name)*7+int(name[0]))%len(hashes)] }
		name := rapid.OneOf(rapid.StringMatching(`[a-h]{1,3}`), rapid.StringMatching(`[ab]{7,17}`))
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			n := name.Draw(t, "name")
			h := hash(n)
			switch r := d.get(h, n); {
			case r != model[n]:
				t.Fatalf("get(%q) = %p, want %p", n, r, model[n])
			case r == nil:
				r = &domainRecord{domain: n}
				d.put(h, r)
				model[n] = r
			default:
				if !d.remove(h, r) {
					t.Fatalf("remove(%q) removed nothing", n)
				}
				if d.remove(h, r) {
					t.Fatalf("remove(%q) removed it twice", n)
				}
				delete(model, n)
			}
			if msg := d.check(); msg != "" {
				t.Fatalf("after %q: %s", n, msg)
			}
			if d.count != len(model) {
				t.Fatalf("len = %d, want %d", d.count, len(model))
			}
		}
		for n, r := range model {
			if got := d.get(hash(n), n); got != r {
				t.Fatalf("get(%q) = %p, want %p", n, got, r)
			}
		}
		var got, want []string
		d.all(func(_ uint64, r *domainRecord) { got = append(got, r.domain) })
		for n := range model {
			want = append(want, n)
		}
		slices.Sort(got)
		slices.Sort(want)
		assert.Equal(t, want, got)
	})
}

func TestDomainMapGrowsAndShrinks(t *testing.T) {
	var d domainMap
	assert.Nil(t, d.get(1, "a"), "the zero map is empty")
	assert.False(t, d.remove(1, &domainRecord{domain: "a"}), "nothing to remove from an empty map")
	recs := make([]*domainRecord, 1000)
	for i := range recs {
		recs[i] = &domainRecord{domain: strconv.Itoa(i)}
		d.put(uint64(i)*0x9e3779b97f4a7c15, recs[i])
	}
	assert.Empty(t, d.check())
	assert.Len(t, d.table.Load().slots, 2048, "1000 records fit 7/8 of 2048 slots, not of 1024")
	for i, r := range recs {
		assert.Same(t, r, d.get(uint64(i)*0x9e3779b97f4a7c15, r.domain))
		require.True(t, d.remove(uint64(i)*0x9e3779b97f4a7c15, r))
		if msg := d.check(); msg != "" {
			t.Fatalf("after removing %d: %s", i, msg)
		}
	}
	assert.Zero(t, d.count)
	assert.Nil(t, d.table.Load(), "an emptied map lets its table go")
}

// TestDomainMapConcurrentLookups looks records up without a lock while
// another goroutine adds and removes others, through every resize: a record
// that stays in the map must be found every time. Run with -race.
func TestDomainMapConcurrentLookups(t *testing.T) {
	var (
		d    domainMap
		mu   sync.Mutex                                        // the shard's mu: serializes changes
		hash = func(i int) uint64 { return uint64(i%7) << 61 } // few homes, long runs
	)
	stay := make([]*domainRecord, 20)
	for i := range stay {
		stay[i] = &domainRecord{domain: "stay-" + strconv.Itoa(i)}
		d.put(hash(i), stay[i])
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		for round := range 50 {
			churn := make([]*domainRecord, 200)
			for i := range churn {
				churn[i] = &domainRecord{domain: "churn-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)}
				mu.Lock()
				d.put(hash(i), churn[i])
				mu.Unlock()
			}
			for i, r := range churn {
				mu.Lock()
				d.remove(hash(i), r)
				mu.Unlock()
			}
		}
	})
	for i := 0; !done.Load(); i = (i + 1) % len(stay) {
		if got := d.get(hash(i), stay[i].domain); got != stay[i] {
			t.Fatalf("get(%q) = %p, want %p", stay[i].domain, got, stay[i])
		}
		if got := d.get(hash(i), "absent"); got != nil {
			t.Fatalf("get(absent) = %p", got)
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, d.check())
	assert.Equal(t, len(stay), d.count)
}

// TestDomainMapLookupsWhileEmptying looks up a name that is never there
// while another goroutine fills the map and empties it again, so that its
// table is dropped and made anew, through the smallest size. Run with -race.
func TestDomainMapLookupsWhileEmptying(t *testing.T) {
	var (
		d  domainMap
		mu sync.Mutex // the shard's mu
	)
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		for round := range 200 {
			recs := make([]*domainRecord, 1+round%40)
			for i := range recs {
				recs[i] = &domainRecord{domain: strconv.Itoa(i)}
				mu.Lock()
				d.put(uint64(i)<<58, recs[i])
				mu.Unlock()
			}
			for i, r := range recs {
				mu.Lock()
				d.remove(uint64(i)<<58, r)
				mu.Unlock()
			}
		}
	})
	lookups := 0
	for ; !done.Load() || lookups < 1000; lookups++ {
		if got := d.get(0, "absent"); got != nil {
			t.Fatalf("get(absent) = %p", got)
		}
	}
	wg.Wait()
	assert.Nil(t, d.table.Load(), "the map ends empty")
}

func TestShardSize(t *testing.T) {
	size := unsafe.Sizeof(shard{})
	assert.Zero(t, size%shardAlign, "shard is %d bytes; adjust its padding to reach a multiple of %d", size, shardAlign)
}

// TestRecordKeepsOwnKey checks that a record does not share its key's
// memory with the caller's string, which may be a view of a larger buffer
// the caller reuses: a short key is held in the record itself, a longer one
// in a copy of its own.
func TestRecordKeepsOwnKey(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, inlineKeyLen, inlineKeyLen + 1, MaxDomainLen} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			m, err := New()
			require.NoError(t, err)
			buf := []byte(strings.Repeat("k", n) + ", then the rest of the message it came in")
			key := unsafe.String(&buf[0], n)
			name := strings.Clone(key)
			_, err = m.TryAcquire(key, 0)
			require.NoError(t, err)
			_, r := m.lockRecord(name, false)
			require.NotNil(t, r)
			r.mu.Unlock()
			assert.NotSame(t, unsafe.StringData(key), unsafe.StringData(r.domain))
			inRecord := unsafe.StringData(r.domain) == &r.key[0]
			assert.Equal(t, n <= inlineKeyLen, inRecord, "the key is held in the record itself")

			// A journaled Manager copies every key apart (see record.key).
			j, err := New(WithJournal(&discardJournal{}))
			require.NoError(t, err)
			_, err = j.TryAcquire(key, 0)
			require.NoError(t, err)
			_, jr := j.lockRecord(name, false)
			require.NotNil(t, jr)
			jr.mu.Unlock()
			assert.NotSame(t, &jr.key[0], unsafe.StringData(jr.domain), "a journaled record's key")
			assert.NotSame(t, unsafe.StringData(key), unsafe.StringData(jr.domain))
			copy(buf, strings.Repeat("x", n)) // the caller reuses its buffer
			info, err := m.Inspect(name)
			require.NoError(t, err)
			assert.True(t, info.Leased, "the domain is still found under its name")
			domains, err := m.Domains()
			require.NoError(t, err)
			assert.Equal(t, []string{name}, domains)
		})
	}
}

// discardJournal is a Journal that keeps nothing: every record is durable
// at once, and there is nothing to replay.
type discardJournal struct{ seq uint64 }

func (d *discardJournal) AppendRecord(Record) (uint64, error) { d.seq++; return d.seq, nil }
func (d *discardJournal) Wait(uint64) error                   { return nil }
func (d *discardJournal) ReplayRecords(func([]byte) error, func(uint64, Record) error) error {
	return nil
}
func (d *discardJournal) SnapshotState(func(io.Writer) error) error { return nil }
func (d *discardJournal) SnapshotDue() bool                         { return false }
func (d *discardJournal) Close() error                              { return nil }
