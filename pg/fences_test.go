package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// rebase_fences, which an operator runs after pg_upgrade or the restore
// of a dump (whose timeline starts again at 1), raises the floor above
// every fence the domains hold, those of later timelines included: the
// next grants, through statements the Manager prepared before, jump above
// it.
func TestRebaseFences(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := context.Background()
	m, schema := newManager(t, pool)
	s := pgx.Identifier{schema}.Sanitize()
	for off := range int64(2) { // the fast statements are prepared and planned
		res, err := m.TryAcquire(ctx, "d", off)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Succeed(ctx, "d", res.Token); err != nil {
			t.Fatal(err)
		}
	}
	// The domain holds a fence of a third timeline, as after pg_upgrade
	// of a cluster promoted twice.
	const epoch = int64(1) << 40
	if _, err := pool.Exec(ctx, "UPDATE "+s+".domains SET fence = $1 WHERE domain = 'd'", 2*epoch+5); err != nil {
		t.Fatal(err)
	}
	var floor int64
	if err := pool.QueryRow(ctx, "SELECT "+s+".rebase_fences()").Scan(&floor); err != nil {
		t.Fatal(err)
	}
	if floor != 3*epoch {
		t.Fatalf("rebase_fences: floor %d, want %d", floor, 3*epoch)
	}
	res, err := m.TryAcquire(ctx, "d", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(res.Token.Fence()); got != 3*epoch+1 {
		t.Fatalf("the grant after rebase_fences: fence %d, want %d", got, 3*epoch+1)
	}
	if _, err := m.Succeed(ctx, "d", res.Token); err != nil {
		t.Fatal(err)
	}
	// Another domain's first grant is above the floor too.
	res, err = m.TryAcquire(ctx, "e", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(res.Token.Fence()); got != 3*epoch+1 {
		t.Fatalf("a new domain's first grant after rebase_fences: fence %d, want %d", got, 3*epoch+1)
	}
}

// Every statement that grants a lease takes its fence above the floor:
// TryAcquire of a known domain (fast.go's statement) and of a new one
// (try_acquire, through _grant), SucceedNext's hand-off (succeed, through
// _grant), Claim (fastpull.go's statement), Claim taking a due lease over
// (the claim function) and ClaimNext (fastpull.go's), each a domain's
// first grant after rebase_fences raised the floor. A ClaimNext made
// again, as after a lost answer, is answered with the lease it granted.
func TestEveryGrantAboveFloor(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := context.Background()
	m, schema := newManager(t, pool, worklease.WithLeaseTTL(time.Minute))
	s := pgx.Identifier{schema}.Sanitize()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(domain string, off int64) worklease.Token {
		t.Helper()
		res, err := m.TryAcquire(ctx, domain, off)
		must(err)
		if res.Status != worklease.Acquired {
			t.Fatalf("TryAcquire(%s, %d): %v", domain, off, res.Status)
		}
		return res.Token
	}

	// Before the floor rises: "known" is idle, with offset 0 done; "handoff"
	// holds offset 0, with offset 1 queued behind it; "due" holds a lease
	// that will be due; "claim" has an offset ready; "next" has two, the
	// first claimed.
	_, err := m.Succeed(ctx, "known", acquire("known", 0))
	must(err)
	handoff := acquire("handoff", 0)
	if res, err := m.TryAcquire(ctx, "handoff", 1); err != nil || res.Status != worklease.Enqueued {
		t.Fatalf("TryAcquire(handoff, 1): %v, %v; want Enqueued", res.Status, err)
	}
	acquire("due", 0)
	_, err = m.EnqueueMany(ctx, []pg.Item{{Domain: "next", Offset: 0}, {Domain: "next", Offset: 1}})
	must(err)
	claimed, err := m.Claim(ctx, 1)
	must(err)
	if len(claimed) != 1 || claimed[0].Domain != "next" {
		t.Fatalf("Claim: %+v; want next's offset 0", claimed)
	}
	_, err = m.Enqueue(ctx, "claim", 0, nil)
	must(err)

	const epoch = uint64(1) << 40
	_, err = pool.Exec(ctx, "UPDATE "+s+".domains SET fence = $1 WHERE domain = 'known'", int64(epoch+7))
	must(err)
	var floor uint64
	must(pool.QueryRow(ctx, "SELECT "+s+".rebase_fences()").Scan(&floor))
	if floor != 2*epoch {
		t.Fatalf("rebase_fences: floor %d, want %d", floor, 2*epoch)
	}
	above := func(what string, tok worklease.Token) {
		t.Helper()
		if tok.Fence() <= floor {
			t.Errorf("%s: fence %d, not above the floor %d", what, tok.Fence(), floor)
		}
	}

	above("TryAcquire of a known domain", acquire("known", 1))
	above("TryAcquire of a new domain", acquire("new", 0))
	done, err := m.SucceedNext(ctx, "handoff", handoff)
	must(err)
	if done.Status != worklease.NextAcquired {
		t.Fatalf("SucceedNext(handoff): %v; want NextAcquired", done.Status)
	}
	above("SucceedNext's hand-off", done.Lease.Token)
	c, err := m.Claim(ctx, 1)
	must(err)
	if len(c) != 1 || c[0].Domain != "claim" {
		t.Fatalf("Claim: %+v; want claim's offset 0", c)
	}
	above("Claim", c[0].Token)
	next, errs, err := m.ClaimNext(ctx, claimed)
	must(err)
	if len(next) != 1 || errs[0] != nil || next[0].Offset != 1 {
		t.Fatalf("ClaimNext: %+v, %v; want next's offset 1", next, errs)
	}
	above("ClaimNext", next[0].Token)
	again, errs, err := m.ClaimNext(ctx, claimed)
	must(err)
	if len(again) != 1 || errs[0] != nil || again[0].Token != next[0].Token {
		t.Errorf("ClaimNext made again: %+v, %v; want the lease it granted, %v", again, errs, next[0].Token)
	}
	_, err = pool.Exec(ctx, "UPDATE "+s+".domains SET lease_expires_at = now() - interval '1 second' WHERE domain = 'due'")
	must(err)
	c, err = m.Claim(ctx, 1)
	must(err)
	if len(c) != 1 || c[0].Domain != "due" {
		t.Fatalf("Claim with a lease due: %+v; want due's offset 0 again", c)
	}
	above("Claim taking a due lease over", c[0].Token)
}
