package pg

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	m.vacuum.mu.Lock()
	checked, allowed := m.vacuum.checked, m.vacuum.allowed
	m.vacuum.mu.Unlock()
	if !checked || !allowed {
		t.Fatalf("the schema's owner: may vacuum known %v, allowed %v; want both", checked, allowed)
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

// A Manager whose role may use the tables but does not own them asks once
// whether it may vacuum them, and then never tries: PostgreSQL would only
// warn, for each table, every time.
func TestVacuumTakesTheTablesOwner(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "vacuum")
	owner, err := OpenSchema(ctx, pool, name) // installs the schema
	if err != nil {
		t.Fatal(err)
	}
	_ = owner.Close()
	role := "user_" + name
	var database string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&database); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT CREATE ON DATABASE " + pgx.Identifier{database}.Sanitize() + " TO " + role, // Open creates the schema if need be
		"GRANT USAGE, CREATE ON SCHEMA " + name + " TO " + role,
		"GRANT ALL ON ALL TABLES IN SCHEMA " + name + " TO " + role,
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA " + name + " TO " + role,
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA " + name + " TO " + role,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, "DROP OWNED BY "+role+"; DROP ROLE "+role); err != nil {
			t.Error(err)
		}
	})
	cfg := pool.Config()
	cfg.ConnConfig.User = role
	user, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	m, err := OpenSchema(ctx, user, name)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.vacuum.every = 1
	var items []Item
	for i := range 5 {
		items = append(items, Item{Domain: fmt.Sprintf("d%d", i), Offset: 1})
	}
	if _, err := m.EnqueueMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		claims, err := m.Claim(ctx, 1)
		if err != nil || len(claims) != 1 {
			t.Fatalf("Claim(1): %d claims, %v", len(claims), err)
		}
		if _, err := m.SucceedMany(ctx, claims); err != nil {
			t.Fatal(err)
		}
		for { // the check, or the vacuum, ends
			m.vacuum.mu.Lock()
			running := m.vacuum.running
			m.vacuum.mu.Unlock()
			if !running {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	m.vacuum.mu.Lock()
	checked, allowed := m.vacuum.checked, m.vacuum.allowed
	m.vacuum.mu.Unlock()
	if !checked || allowed {
		t.Fatalf("another role: may vacuum known %v, allowed %v; want known, not allowed", checked, allowed)
	}
	var n int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(vacuum_count), 0) FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname IN ('domains', 'backlog')`, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("vacuums of the tables: %d, %v; want 0", n, err)
	}
}
