package pg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
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

// The batches of completions, ClaimNext's and SucceedMany's, find each
// domain of a batch that mixes short domains with long ones by the key the
// caller gives: here a short domain, one of keyBytes bytes, longer ones
// that start with it (their keys do too), of keyBytes+1 bytes and of the
// longest, and others of those lengths, of random hex, which compression
// does not shrink to a key's length. A lease the batch's statement did not
// find would be ended by Succeed, one at a time: ClaimNext would grant no
// next lease for it, and endBatch would not answer for it.
func TestBatchesOfShortAndLongDomains(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "batchkeys")
	m, err := OpenSchema(ctx, pool, name)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	randomHex := func(n int) string {
		b := make([]byte, (n+1)/2)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return hex.EncodeToString(b)[:n]
	}
	short := randomHex(keyBytes)
	domains := []string{"short", short, short + randomHex(1), short + randomHex(worklease.MaxDomainLen-keyBytes),
		randomHex(keyBytes + 1), randomHex(worklease.MaxDomainLen)}
	for i, d := range domains {
		for off := int64(1); off <= 3; off++ {
			if st, err := m.Enqueue(ctx, d, off, []byte{byte(i), byte(off)}); err != nil || st != worklease.Enqueued {
				t.Fatalf("Enqueue(%d bytes, %d): %v, %v", len(d), off, st, err)
			}
		}
	}
	claims, err := m.Claim(ctx, len(domains)+1)
	if err != nil || len(claims) != len(domains) {
		t.Fatalf("Claim: %d claims, %v", len(claims), err)
	}

	next, errs, err := m.ClaimNext(ctx, claims)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ClaimNext: %v, %v", errs, err)
	}
	if len(next) != len(domains) {
		t.Fatalf("ClaimNext of %d leases granted %d next ones", len(domains), len(next))
	}
	for _, c := range next {
		i := slices.Index(domains, c.Domain)
		if i < 0 || c.Offset != 2 || !bytes.Equal(c.Payload, []byte{byte(i), 2}) {
			t.Errorf("ClaimNext granted offset %d of a domain of %d bytes (index %d), payload %v", c.Offset, len(c.Domain), i, c.Payload)
		}
	}

	var ds [][]byte
	var fences, serials []int64
	for _, c := range next {
		ds = append(ds, []byte(c.Domain))
		fences, serials = append(fences, int64(c.Token.Fence())), append(serials, int64(c.Token.Serial()))
	}
	all, err := m.endBatch(ctx, "SucceedMany", ds, fences, serials, false)
	if err != nil {
		t.Fatalf("SucceedMany's batch: %v", err)
	}
	if len(all) != len(domains) {
		t.Fatalf("SucceedMany's batch of %d leases ended %d", len(domains), len(all))
	}
	for _, e := range all {
		if !slices.Contains(domains, string(e.domain)) || e.off != 2 {
			t.Errorf("SucceedMany's batch ended offset %d of a domain of %d bytes", e.off, len(e.domain))
		}
	}
	for _, d := range domains {
		info, err := m.Inspect(ctx, d)
		if err != nil || info.Processed != 2 || info.Leased || !slices.Equal(info.Backlog, []int64{3}) {
			t.Errorf("Inspect of a domain of %d bytes: %+v, %v", len(d), info, err)
		}
	}
}
