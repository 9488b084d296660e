package worklease

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestDomainHashSpreads checks the domain hash on keys of every length up
// to a few blocks: distinct keys get distinct hashes, a change of any one
// bit of a key changes its hash, and two Managers' seeds hash alike keys
// apart.
func TestDomainHashSpreads(t *testing.T) {
	t.Parallel()
	k := newDomainHash()
	seen := make(map[uint64]string)
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 70 {
		for i := range 2000 {
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			if n >= 4 {
				copy(b, fmt.Sprint(i)) // keys that differ in a few bytes only
			}
			s := string(b)
			h := k.sum(s)
			if other, ok := seen[h]; ok && other != s {
				t.Fatalf("%q and %q hash alike: %#x", other, s, h)
			}
			seen[h] = s
			if i == 0 {
				for bit := range 8 * n {
					c := []byte(s)
					c[bit/8] ^= 1 << (bit % 8)
					if k.sum(string(c)) == h {
						t.Fatalf("flipping bit %d of a %d-byte key keeps its hash", bit, n)
					}
				}
			}
		}
	}
	other := newDomainHash()
	same := 0
	for _, s := range []string{"", "a", "tenant-7", "a longer domain key, past one block"} {
		if other.sum(s) == k.sum(s) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("two seeds hash %d of 4 keys alike", same)
	}
}
