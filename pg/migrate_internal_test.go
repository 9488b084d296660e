package pg

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/worklease/worklease"
)

// A schema installed by an earlier version is upgraded in place by Open:
// what it held, queued offsets with their payloads and a lease in flight,
// carries on under the new statements.
func TestMigrateUpgrades(t *testing.T) {
	ctx, pool, schema := scratchSchema(t, "upgrade")

	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Skip("one migration: nothing to upgrade from")
	}
	// The first version's schema, with the first version's calls on it: an
	// offer queued, then one claimed through its claim function.
	instance, err := apply(ctx, pool, pgx.Identifier{schema}.Sanitize(), all[:1])
	if err != nil {
		t.Fatal(err)
	}
	var status int16
	for _, off := range []int64{1, 2} {
		if err := pool.QueryRow(ctx, "SELECT (a).status FROM "+schema+".enqueue_many(ARRAY[$1::bytea], ARRAY[$2::bigint], ARRAY[$3::bytea], NULL, ROW(5, NULL, false, false, false, false)::"+schema+".policy) e",
			[]byte("d"), off, []byte{byte('a' + off)}).Scan(&status); err != nil || status != int16(worklease.Enqueued) {
			t.Fatalf("the first version's enqueue_many of %d: %d, %v", off, status, err)
		}
	}
	var claimed int64
	if err := pool.QueryRow(ctx, "SELECT off FROM "+schema+".claim(1, NULL, ROW(5, NULL, false, false, false, false)::"+schema+".policy)").Scan(&claimed); err != nil || claimed != 1 {
		t.Fatalf("the first version's claim: %d, %v", claimed, err)
	}

	m, err := OpenSchema(ctx, pool, schema)
	if err != nil {
		t.Fatalf("Open of the first version's schema: %v", err)
	}
	if m.instance != instance {
		t.Errorf("instance after the upgrade: %d, want %d", m.instance, instance)
	}
	var version int
	if err := pool.QueryRow(ctx, "SELECT max(version) FROM "+schema+".migrations").Scan(&version); err != nil || version != all[len(all)-1].version {
		t.Fatalf("version after Open: %d, %v; want %d", version, err, all[len(all)-1].version)
	}
	leases, err := m.Leases(ctx)
	if err != nil || len(leases) != 1 || leases[0].Offset != 1 {
		t.Fatalf("Leases after the upgrade: %+v, %v; want offset 1 in flight", leases, err)
	}
	errs, err := m.SucceedMany(ctx, []worklease.Claim{{Domain: "d", Offset: 1, Token: leases[0].Token}})
	if err != nil || errs[0] != nil {
		t.Fatalf("SucceedMany of the lease granted before the upgrade: %v, %v", errs, err)
	}
	got, err := m.Claim(ctx, 10)
	if err != nil || len(got) != 1 || got[0].Offset != 2 || string(got[0].Payload) != "c" {
		t.Fatalf("Claim after the upgrade: %+v, %v; want offset 2 with its payload", got, err)
	}
	if st, err := m.EnqueueMany(ctx, []Item{{Domain: "d", Offset: 1}, {Domain: "d", Offset: 3}}); err != nil ||
		st[0] != worklease.AlreadyProcessed || st[1] != worklease.Enqueued {
		t.Fatalf("EnqueueMany after the upgrade: %v, %v", st, err)
	}
}

// A role that may use a schema's tables and functions but may not create
// or change a schema, as an application's role often is, opens an
// installed schema that is up to date and works in it. A schema it would
// have to install gets the database's refusal, and one that is newer than
// the package ErrSchemaTooNew.
func TestOpenAsARoleThatMayNotCreate(t *testing.T) {
	ctx, pool, schema := scratchSchema(t, "user")
	owner := open(t, pool, schema) // installs the schema
	_ = owner.Close()
	user := userPool(t, pool, schema)

	m := open(t, user, schema)
	if m.instance != owner.instance {
		t.Errorf("instance: %d, want the owner's %d", m.instance, owner.instance)
	}
	enqueueDomains(t, m, 3)
	claimAndSucceed(t, m, 3)
	res, err := m.TryAcquire(ctx, "push", 1)
	if err != nil || res.Status != worklease.Acquired {
		t.Fatalf("TryAcquire: %v, %v", res, err)
	}
	if _, err := m.Succeed(ctx, "push", res.Token); err != nil {
		t.Fatalf("Succeed: %v", err)
	}

	other := schema + "_new"
	t.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+other+" CASCADE") })
	var pgErr *pgconn.PgError
	if _, err := OpenSchema(ctx, user, other); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("Open of a schema to install: %v; want the database's insufficient_privilege", err)
	}

	if _, err := pool.Exec(ctx, "INSERT INTO "+schema+".migrations (version) VALUES (1000)"); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSchema(ctx, user, schema); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("Open of a newer schema: %v; want ErrSchemaTooNew", err)
	}
}

// A role that may not create, opening a schema while its owner upgrades
// it, waits for the upgrade and opens the schema it left up to date.
func TestOpenAsARoleThatMayNotCreateDuringAnUpgrade(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "user")
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Skip("one migration: nothing to upgrade from")
	}
	schema, last := pgx.Identifier{name}.Sanitize(), all[len(all)-1]
	instance, err := apply(ctx, pool, schema, all[:len(all)-1])
	if err != nil {
		t.Fatal(err)
	}
	user := userPool(t, pool, name)
	tx, err := pool.Begin(ctx) // the owner's upgrade, under way, as apply does it
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{
		"SELECT pg_advisory_xact_lock(hashtext('worklease.pg.migrate:" + schema + "'))",
		strings.ReplaceAll(last.sql, "{{schema}}", schema),
		fmt.Sprintf("INSERT INTO %s.migrations (version) VALUES (%d)", schema, last.version),
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	type opened struct {
		m   *Manager
		err error
	}
	done := make(chan opened, 1)
	go func() {
		m, err := OpenSchema(ctx, user, name)
		done <- opened{m, err}
	}()
	waitFor(t, "Open did not wait for the upgrade", func() (waiting bool) {
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("Open after the upgrade it waited for: %v", o.err)
	}
	defer o.m.Close()
	if o.m.instance != instance {
		t.Errorf("instance: %d, want %d", o.m.instance, instance)
	}
}
