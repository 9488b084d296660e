package worklease

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"
)

// TestDomainMapCollisions drives a domainMap with a tiny hash space, so that
// names collide all the time, against a plain map.
func TestDomainMapCollisions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := newDomainMap()
		model := map[string]*record{}
		hash := func(name string) uint64 { return uint64(len(name) % 3) } // three buckets
		name := rapid.StringMatching(`[a-e]{1,4}`)
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			n := name.Draw(t, "name")
			h := hash(n)
			switch r := d.get(h, n); {
			case r != model[n]:
				t.Fatalf("get(%q) = %p, want %p", n, r, model[n])
			case r == nil:
				r = &record{domain: n}
				d.put(h, r)
				model[n] = r
			default:
				d.remove(h, r)
				delete(model, n)
			}
			if d.len() != len(model) {
				t.Fatalf("len = %d, want %d", d.len(), len(model))
			}
			if d.overflow != nil && len(d.overflow) == 0 {
				t.Fatalf("empty overflow map kept")
			}
		}
		var got, want []string
		d.all(func(r *record) { got = append(got, r.domain) })
		for n := range model {
			want = append(want, n)
		}
		slices.Sort(got)
		slices.Sort(want)
		assert.Equal(t, want, got)
	})
}

func TestDomainMapRemoveIsIdempotent(t *testing.T) {
	d := newDomainMap()
	a, b := &record{domain: "a"}, &record{domain: "b"}
	d.put(7, a)
	d.put(7, b) // collides: goes to overflow
	d.remove(7, a)
	d.remove(7, a) // already gone: no effect on b
	assert.Same(t, b, d.get(7, "b"))
	assert.Nil(t, d.get(7, "a"))
	d.put(7, a) // a comes back into the free hash slot
	assert.Same(t, a, d.get(7, "a"))
	assert.Same(t, b, d.get(7, "b"))
	assert.Equal(t, 2, d.len())
}

func TestShardSize(t *testing.T) {
	size := unsafe.Sizeof(shard{})
	assert.Zero(t, size%shardAlign, "shard is %d bytes; adjust its padding to reach a multiple of %d", size, shardAlign)
}
