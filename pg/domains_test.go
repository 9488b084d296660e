package pg_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// longDomains returns n domains of MaxDomainLen bytes, in the order of
// their bytes, that no compression shrinks, that are not UTF-8, and that
// share their first 3,000 bytes: more than their keys hold (see
// 006_domain_keys.sql), which order them by their SHA-256.
func longDomains(n int) []string {
	const shared = 3000
	fill := func(b []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0x10ad))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	var out []string
	for i := range n {
		b := make([]byte, worklease.MaxDomainLen)
		fill(b[:shared], 0)
		fill(b[shared:], uint64(i)+1)
		b[0], b[shared] = 0xff, byte(i)
		out = append(out, string(b))
	}
	return out
}

// Every domain the contract accepts works on PostgreSQL, in the calls the
// conformance suite does not make (EnqueueMany, SetPriority) and on the
// paths of the plain statements (the usual TryAcquire and Succeed, Claim,
// ClaimNext, SucceedMany): a batch with a long domain among short ones is
// stored whole. The listings order long domains by key: those that share
// their first 1,024 bytes by their SHA-256.
func TestLongestDomains(t *testing.T) {
	pool := testPool(t)
	m, _ := newManager(t, pool)
	ctx := context.Background()
	long := longDomains(3)

	items := []pg.Item{{Domain: "short", Offset: 1, Payload: []byte("s")}}
	for i, d := range long {
		items = append(items, pg.Item{Domain: d, Offset: 1, Payload: []byte{byte('a' + i)}})
	}
	st, err := m.EnqueueMany(ctx, items)
	if err != nil || !slices.Equal(st, slices.Repeat([]worklease.AcquireStatus{worklease.Enqueued}, len(items))) {
		t.Fatalf("EnqueueMany of a batch with long domains: %v, %v", st, err)
	}
	if err := m.SetPriority(ctx, long[2], 5); err != nil {
		t.Fatalf("SetPriority: %v", err)
	}
	if st, err := m.Enqueue(ctx, long[2], 2, []byte("next")); err != nil || st != worklease.Enqueued {
		t.Fatalf("Enqueue: %v, %v", st, err)
	}
	claims, err := m.Claim(ctx, 1)
	if err != nil || len(claims) != 1 || claims[0].Domain != long[2] || string(claims[0].Payload) != "c" {
		t.Fatalf("Claim of the domain of the highest priority: %d claims, %v", len(claims), err)
	}
	next, errs, err := m.ClaimNext(ctx, claims)
	if err != nil || errors.Join(errs...) != nil || len(next) != 1 || next[0].Domain != long[2] || string(next[0].Payload) != "next" {
		t.Fatalf("ClaimNext: %d claims, %v, %v", len(next), errs, err)
	}
	rest, err := m.Claim(ctx, 10)
	if err != nil || len(rest) != 3 {
		t.Fatalf("Claim of the rest: %d claims, %v", len(rest), err)
	}
	if errs, err := m.SucceedMany(ctx, append(rest, next...)); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("SucceedMany: %v, %v", errs, err)
	}
	for off := int64(2); off < 5; off++ { // an idle domain with nothing queued: one UPDATE each
		res, err := m.TryAcquire(ctx, long[0], off)
		if err != nil || res.Status != worklease.Acquired {
			t.Fatalf("TryAcquire(%d): %v, %v", off, res.Status, err)
		}
		if _, err := m.Succeed(ctx, long[0], res.Token); err != nil {
			t.Fatalf("Succeed(%d): %v", off, err)
		}
	}
	if info, err := m.Inspect(ctx, long[0]); err != nil || info.Processed != 4 {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}

	// By key, a page each.
	byKey := slices.Clone(long)
	slices.SortFunc(byKey, func(a, b string) int {
		ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
		return bytes.Compare(ha[:], hb[:])
	})
	for i, d := range long {
		if _, err := m.Kill(ctx, d, 9, "x"); err != nil {
			t.Fatalf("Kill of %d: %v", i, err)
		}
	}
	var got []string
	for q := (worklease.DomainQuery{Prefix: long[0][:3000], Limit: 1}); ; {
		p, err := m.ListDomains(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Domains {
			got = append(got, d.Domain)
		}
		if q.After = p.Next; q.After == "" {
			break
		}
	}
	if !slices.Equal(got, byKey) {
		t.Errorf("ListDomains of the long domains lists %d, out of order", len(got))
	}
	got = got[:0]
	for q := (worklease.DeadLetterQuery{Limit: 1}); ; {
		p, err := m.ListDeadLetters(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range p.DeadLetters {
			got = append(got, dl.Domain)
		}
		if q.After = p.Next; q.After == "" {
			break
		}
	}
	if !slices.Equal(got, byKey) {
		t.Errorf("ListDeadLetters of the long domains lists %d, out of order", len(got))
	}
}

// An error names a domain as the in-memory Manager's errors do: by a
// short prefix and its length if it is long.
func TestErrorsNameTheDomain(t *testing.T) {
	pool := testPool(t)
	m, _ := newManager(t, pool)
	mem, err := worklease.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tooLong := longDomains(1)[0] + "x"
	_, pgErr := m.TryAcquire(ctx, tooLong, 1)
	_, memErr := mem.TryAcquire(tooLong, 1)
	if !errors.Is(pgErr, worklease.ErrInvalidDomain) || !errors.Is(memErr, worklease.ErrInvalidDomain) {
		t.Fatalf("TryAcquire of a domain too long: %v; in memory %v", pgErr, memErr)
	}
	// The in-memory Manager's error ends with the call and the domain's name.
	_, name, ok := strings.Cut(memErr.Error(), "(TryAcquire on domain ")
	if !ok || !strings.HasSuffix(name, ")") {
		t.Fatalf("the in-memory Manager's error: %s", memErr)
	}
	name = strings.TrimSuffix(name, ")")
	if want := "pg: TryAcquire on domain " + name + ": " + worklease.ErrInvalidDomain.Error(); pgErr.Error() != want {
		t.Errorf("TryAcquire of a domain too long: %s; want %s", pgErr, want)
	}
	if !strings.Contains(name, "… (4097 bytes)") || len(name) > 300 {
		t.Errorf("the domain's name in errors: %s", name)
	}
}
