package pg

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/worklease/worklease"
)

// The statements that take a domain's key from the caller (see keyIs) find
// its row only if key makes the key the schema's _key makes: a domain of up
// to keyBytes bytes is its own key, a longer one its first keyBytes bytes
// and its SHA-256.
func TestKeyIsSchemaKey(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "keys")
	m, err := OpenSchema(ctx, pool, name)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, keyBytes - 1, keyBytes, keyBytes + 1, keyBytes + 32, worklease.MaxDomainLen} {
		d := make([]byte, n)
		for i := range d {
			d[i] = byte(rng.Uint32())
		}
		var want []byte
		if err := pool.QueryRow(ctx, "SELECT "+pgx.Identifier{name}.Sanitize()+"._key($1)", d).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := key(d); !bytes.Equal(got, want) {
			t.Errorf("key of a domain of %d bytes: %d bytes, starting %x; _key: %d bytes, starting %x", n, len(got), got[:min(len(got), 8)], len(want), want[:min(len(want), 8)])
		}
	}
}
