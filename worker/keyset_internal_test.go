package worker

import (
	"testing"

	"pgregory.net/rapid"
)

// TestKeySetModel drives a keySet against a map with keys drawn from a
// small set, many of them in the same home slot, so that runs form, wrap
// around the table's end and are cut by removals; after every step the
// set holds what the map does, and every key it holds is found from its
// home slot without crossing an empty one.
func TestKeySetModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s keySet
		model := map[uint64]bool{}
		key := rapid.Uint64Range(1, 40)
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				k := key.Draw(t, "k")
				if got := s.add(k); got != !model[k] {
					t.Fatalf("add(%d) = %v; held before: %v", k, got, model[k])
				}
				model[k] = true
			},
			"remove": func(t *rapid.T) {
				k := key.Draw(t, "k")
				if got := s.remove(k); got != model[k] {
					t.Fatalf("remove(%d) = %v; held before: %v", k, got, model[k])
				}
				delete(model, k)
			},
			"": func(t *rapid.T) {
				if s.n != len(model) {
					t.Fatalf("n = %d, want %d", s.n, len(model))
				}
				for k := uint64(1); k <= 41; k++ {
					if s.has(k) != model[k] {
						t.Fatalf("has(%d) = %v, want %v", k, s.has(k), model[k])
					}
				}
				held := 0
				for _, k := range s.slots {
					if k != 0 {
						held++
					}
				}
				if held != s.n || 2*s.n > len(s.slots) {
					t.Fatalf("%d slots hold keys, n = %d, of %d", held, s.n, len(s.slots))
				}
			},
		})
	})
}

// The keys of one domain's offsets spread over a set's slots: a thousand
// of them probe few slots each.
func TestKeySetSpreadsADomainsOffsets(t *testing.T) {
	q := newQueue(0)
	var s keySet
	for off := range int64(1000) {
		s.add(q.hash(queueKey{"tenant-7", off}))
	}
	probes := 0
	mask := len(s.slots) - 1
	for off := range int64(1000) {
		k := q.hash(queueKey{"tenant-7", off})
		for i := s.home(k); s.slots[i] != k; i = (i + 1) & mask {
			probes++
		}
	}
	if probes > 1000 {
		t.Fatalf("%d probes past the home slots of 1000 keys in %d slots", probes, len(s.slots))
	}
}
