package pg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
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
