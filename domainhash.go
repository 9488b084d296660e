package worklease

import (
	"math/bits"
	"math/rand/v2"
)

// A domainHash hashes domains for the Manager's tables: a seeded hash in
// the manner of wyhash, which the Go runtime uses where a processor has no
// AES instructions. A seed drawn at random for each Manager keeps callers
// that choose domains from choosing ones that collide. It is written out
// here, rather than taken from hash/maphash, because a cycle hashes its
// domain twice and maphash's calls cost a short key more than its hashing
// (about 60 instructions a hash, against 25).
type domainHash struct{ k0, k1 uint64 }

func newDomainHash() domainHash {
	return domainHash{k0: rand.Uint64() | 1, k1: rand.Uint64() | 1}
}

// The constants of wyhash.
const (
	wyp0 = 0xa0761d6478bd642f
	wyp1 = 0xe7037ed1a0b428db
	wyp4 = 0x1d8e4e27c47d124f
)

func wymix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// sum returns s's hash.
func (k domainHash) sum(s string) uint64 {
	n := len(s)
	seed := k.k0
	var a, b uint64
	switch {
	case n == 0:
		return wymix(seed, k.k1)
	case n < 4:
		a = uint64(s[0]) | uint64(s[n>>1])<<8 | uint64(s[n-1])<<16
	case n <= 8:
		a, b = load32(s, 0), load32(s, n-4)
	case n <= 16:
		a, b = load64(s, 0), load64(s, n-8)
	default:
		i := 0
		for ; n-i > 16; i += 16 {
			seed = wymix(load64(s, i)^k.k1, load64(s, i+8)^seed)
		}
		a, b = load64(s, n-16), load64(s, n-8)
	}
	return wymix(wyp4^uint64(n), wymix(a^k.k1, b^seed^wyp0)^wyp1)
}

// load64 returns the 8 bytes of s from i, little-endian: one load, as the
// compiler combines them.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// load32 returns the 4 bytes of s from i, little-endian.
func load32(s string, i int) uint64 {
	s = s[i : i+4]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
