package pg

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/leasetest"
)

// Claims that granted vacuumEvery leases (10 here) start a vacuum of the
// two tables claims read, and only then: the server's statistics count it.
func TestClaimsVacuumTheirTables(t *testing.T) {
	_, pool, name := scratchSchema(t, "vacuum")
	m := open(t, pool, name)
	m.vacuum.every = 10
	enqueueDomains(t, m, 30)
	vacuums := func() int64 { return vacuumCount(t, pool, name) }

	claimAndSucceed(t, m, 9)
	running, granted, _, _ := m.vacuum.state()
	if running || granted != 9 {
		t.Fatalf("after 9 leases: vacuum running %v, %d leases noted; want none running, 9", running, granted)
	}
	if n := vacuums(); n != 0 {
		t.Fatalf("after 9 leases: %d vacuums; want 0", n)
	}

	claimAndSucceed(t, m, 1)
	deadline := time.Now().Add(10 * time.Second)
	for vacuums() < 2 { // one of each table
		if time.Now().After(deadline) {
			t.Fatalf("10 leases later: %d vacuums of the two tables; want 2", vacuums())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, checked, allowed := m.vacuum.state(); !checked || !allowed {
		t.Fatalf("the schema's owner: may vacuum known %v, allowed %v; want both", checked, allowed)
	}
	// Close waits for a vacuum under way, and no other starts.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.noteGrants(10)
	if running, _, _, _ := m.vacuum.state(); running {
		t.Fatal("a vacuum runs after Close")
	}
}

// A Manager whose role may use the tables but does not own them asks once
// whether it may vacuum them, and then never tries: PostgreSQL would only
// warn, for each table, every time.
func TestVacuumTakesTheTablesOwner(t *testing.T) {
	_, pool, name := scratchSchema(t, "vacuum")
	_ = open(t, pool, name).Close() // installs the schema
	m := open(t, userPool(t, pool, name), name)
	m.vacuum.every = 1
	enqueueDomains(t, m, 5)
	for range 5 {
		claimAndSucceed(t, m, 1)
		for { // the check, or the vacuum, ends
			if running, _, _, _ := m.vacuum.state(); !running {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, _, checked, allowed := m.vacuum.state(); !checked || allowed {
		t.Fatalf("another role: may vacuum known %v, allowed %v; want known, not allowed", checked, allowed)
	}
	if n := vacuumCount(t, pool, name); n != 0 {
		t.Fatalf("vacuums of the tables: %d; want 0", n)
	}
}

// A vacuum takes none of the pool's connections: it runs while a call
// holds the only one, under the server's limit of vacuumLimit, which a
// limit of the pool's own, set by its AfterConnect hook, does not shorten.
func TestVacuumConnectsOnItsOwn(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "vacuum")
	cfg := pool.Config()
	cfg.MaxConns = 1
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET statement_timeout = '5s'")
		return err
	}
	one := newPool(t, cfg)
	m := open(t, one, name)
	// This vacuum records the statement timeout it runs under.
	m.pull.vacuum = "CREATE TABLE " + name + ".seen AS SELECT current_setting('statement_timeout') AS timeout -- "
	conn, err := one.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	m.noteGrants(m.vacuum.every)
	waitFor(t, "no vacuum ran while a call held the pool's only connection", func() bool {
		var seen *string
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1)::text", name+".seen").Scan(&seen); err != nil {
			t.Fatal(err)
		}
		return seen != nil
	})
	var timeout string
	if err := conn.QueryRow(ctx, "SELECT timeout FROM "+name+".seen").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "1min" {
		t.Fatalf("the vacuum's statement_timeout: %s; want 1min", timeout)
	}
}

// Close cancels a vacuum under way on the server, rather than leave it
// running behind a closed connection.
func TestCloseCancelsTheVacuum(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "vacuum")
	m := open(t, pool, name)
	// A vacuum that takes its time, and that the server can find by its text.
	m.pull.vacuum = "SELECT pg_sleep(60) -- " + name + " "
	running := func() (n int) {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE starts_with(query, $1) AND state = 'active'",
			m.pull.vacuum).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	m.noteGrants(m.vacuum.every)
	waitFor(t, "the vacuum never began", func() bool { return running() == 1 })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the vacuum still runs on the server after Close", func() bool { return running() == 0 })
}

// A vacuum leaves out a table that another session is vacuuming, rather
// than have the server warn that it skipped it.
func TestVacuumLeavesOutATableBeingVacuumed(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "vacuum")
	cfg := pool.Config()
	var mu sync.Mutex // guards notices
	var notices []string
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, n.Severity+": "+n.Message)
		}
		return nil
	}
	m := open(t, newPool(t, cfg), name)
	tx, err := pool.Begin(ctx) // takes the lock a vacuum of domains takes
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE "+name+".domains IN SHARE UPDATE EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	m.noteGrants(m.vacuum.every)
	waitFor(t, "the vacuum did not end", func() bool { running, _, _, _ := m.vacuum.state(); return !running })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if domains, backlog := vacuumCounts(t, pool, name); domains != 0 || backlog != 1 {
		t.Errorf("vacuums: %d of domains, %d of backlog; want 0 and 1", domains, backlog)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) > 0 {
		t.Errorf("the server said: %q; want nothing", notices)
	}
}

// A vacuum does not leave out a table because a copy of it, in a
// database made from this one as a template, is being vacuumed: the copy's
// tables have the same OIDs.
func TestVacuumHeedsOnlyItsDatabasesLocks(t *testing.T) {
	ctx, admin, name := scratchSchema(t, "vacuum")
	original, copied := "a_"+name, "b_"+name
	connect := func(database string) *pgxpool.Pool {
		cfg := admin.Config()
		cfg.ConnConfig.Database = database
		return newPool(t, cfg)
	}
	t.Cleanup(func() {
		for _, database := range []string{copied, original} {
			if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
				t.Error(err)
			}
		}
	})
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+original); err != nil {
		t.Fatal(err)
	}
	a := connect(original)
	_ = open(t, a, name).Close() // installs the schema
	a.Close()                    // a template database has no connections
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+copied+" TEMPLATE "+original); err != nil {
		t.Fatal(err)
	}
	a, b := connect(original), connect(copied)
	tx, err := b.Begin(ctx) // the lock a vacuum of the copy's domains takes
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE "+name+".domains IN SHARE UPDATE EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	m := open(t, a, name)
	m.noteGrants(m.vacuum.every)
	waitFor(t, "the vacuum did not end", func() bool { running, _, _, _ := m.vacuum.state(); return !running })
	if domains, backlog := vacuumCounts(t, a, name); domains != 1 || backlog != 1 {
		t.Errorf("vacuums: %d of domains, %d of backlog; want 1 and 1 (the lock is the copy's)", domains, backlog)
	}
}

// state returns what v knows: whether a vacuum runs, the leases granted
// since the last began, and whether the role may vacuum and that is known.
func (v *vacuumer) state() (running bool, granted int, checked, allowed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.running, v.granted, v.checked, v.allowed
}

// enqueueDomains enqueues offset 1 of n domains of m's.
func enqueueDomains(t *testing.T, m *Manager, n int) {
	t.Helper()
	var items []Item
	for i := range n {
		items = append(items, Item{Domain: fmt.Sprintf("d%02d", i), Offset: 1})
	}
	if _, err := m.EnqueueMany(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

// claimAndSucceed claims n ready domains of m's and succeeds them.
func claimAndSucceed(t *testing.T, m *Manager, n int) {
	t.Helper()
	ctx := context.Background()
	claims, err := m.Claim(ctx, n)
	if err != nil || len(claims) != n {
		t.Fatalf("Claim(%d): %d claims, %v", n, len(claims), err)
	}
	if _, err := m.SucceedMany(ctx, claims); err != nil {
		t.Fatal(err)
	}
}

// vacuumCounts returns how many times the domains and backlog tables of
// schema were each vacuumed by a VACUUM statement.
func vacuumCounts(t *testing.T, pool *pgxpool.Pool, schema string) (domains, backlog int64) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(sum(vacuum_count) FILTER (WHERE relname = 'domains'), 0),
		coalesce(sum(vacuum_count) FILTER (WHERE relname = 'backlog'), 0) FROM pg_stat_user_tables WHERE schemaname = $1`,
		schema).Scan(&domains, &backlog); err != nil {
		t.Fatal(err)
	}
	return domains, backlog
}

// vacuumCount returns how many times the domains and backlog tables of
// schema were vacuumed by a VACUUM statement, in all.
func vacuumCount(t *testing.T, pool *pgxpool.Pool, schema string) int64 {
	t.Helper()
	domains, backlog := vacuumCounts(t, pool, schema)
	return domains + backlog
}

// Appends that stored vacuumEvery idempotency keys (3 here) start a
// vacuum, which deletes the keys past the key window and no other: an
// Append with a pruned key is a new one.
func TestVacuumPrunesKeys(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "keys")
	clock := leasetest.NewClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := OpenSchema(ctx, pool, name, worklease.WithKeyWindow(time.Minute), worklease.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.vacuum.every = 3
	keys := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{name, "append_keys"}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	appendKey := func(key string) worklease.AppendResult {
		t.Helper()
		res, err := m.Append(ctx, "d", nil, worklease.AppendOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	appendKey("old-1")
	appendKey("old-2")
	clock.Advance(time.Minute)
	appendKey("new") // the third: a vacuum begins
	waitFor(t, "the vacuum pruned no key", func() bool { return keys() == 1 })
	waitFor(t, "the vacuum never ended", func() bool { running, _, _, _ := m.vacuum.state(); return !running })
	if res := appendKey("new"); res.Offset != 2 || res.Status != worklease.AlreadyQueued {
		t.Fatalf("Append of the key within the window: %+v; want offset 2, AlreadyQueued", res)
	}
	if res := appendKey("old-1"); res.Offset != 3 || res.Status != worklease.Enqueued {
		t.Fatalf("Append of a pruned key: %+v; want a new offset, 3", res)
	}
}
