package pg

import (
	"fmt"
	"testing"
	"time"
)

// Claims that granted vacuumEvery leases (10 here) start a vacuum of the
// two tables claims read, and only then: the server's statistics count it.
func TestClaimsVacuumTheirTables(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "vacuum")
	m, err := OpenSchema(ctx, pool, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() }) // if the test stops early
	m.vacuum.every = 10
	var items []Item
	for i := range 30 {
		items = append(items, Item{Domain: fmt.Sprintf("d%02d", i), Offset: 1})
	}
	if _, err := m.EnqueueMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	vacuums := func() (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(vacuum_count), 0) FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname IN ('domains', 'backlog')`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	work := func(n int) {
		t.Helper()
		claims, err := m.Claim(ctx, n)
		if err != nil || len(claims) != n {
			t.Fatalf("Claim(%d): %d claims, %v", n, len(claims), err)
		}
		if _, err := m.SucceedMany(ctx, claims); err != nil {
			t.Fatal(err)
		}
	}

	work(9)
	m.vacuum.mu.Lock()
	running, granted := m.vacuum.running, m.vacuum.granted
	m.vacuum.mu.Unlock()
	if running || granted != 9 {
		t.Fatalf("after 9 leases: vacuum running %v, %d leases noted; want none running, 9", running, granted)
	}
	if n := vacuums(); n != 0 {
		t.Fatalf("after 9 leases: %d vacuums; want 0", n)
	}

	work(1)
	deadline := time.Now().Add(10 * time.Second)
	for vacuums() < 2 { // one of each table
		if time.Now().After(deadline) {
			t.Fatalf("10 leases later: %d vacuums of the two tables; want 2", vacuums())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Close waits for a vacuum under way, and no other starts.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.noteGrants(10)
	m.vacuum.mu.Lock()
	defer m.vacuum.mu.Unlock()
	if m.vacuum.running {
		t.Fatal("a vacuum runs after Close")
	}
}
