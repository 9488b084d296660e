package pg

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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

// The upgrade to keys (006_domain_keys.sql) keeps what the schema holds:
// leases in flight, queued offsets and their payloads, dead letters with
// theirs, paused domains, counts, and a domain of MaxDomainLen bytes that
// the earlier indexes took because it compresses. After it, every call
// reads them through the new indexes, and a domain that does not compress
// works too.
func TestMigrateToDomainKeys(t *testing.T) {
	ctx, pool, name := scratchSchema(t, "keys")
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(mg migration) bool { return mg.version == 6 })
	if i < 0 {
		t.Fatal("no migration 006")
	}
	schema := pgx.Identifier{name}.Sanitize()
	if _, err := apply(ctx, pool, schema, all[:i]); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("L", worklease.MaxDomainLen) // compresses: the earlier indexes took it
	policy := "ROW(0, NULL, false, false, false, false)::" + schema + ".policy"
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The earlier version's calls: a, b and long get offsets with
	// payloads; a's first is claimed; b's is killed, a dead letter that
	// keeps its payload; p is paused.
	exec("SELECT * FROM "+schema+".enqueue_many($1, $2, $3, NULL, "+policy+")",
		[][]byte{[]byte("a"), []byte("a")}, []int64{1, 2}, [][]byte{[]byte("a1"), []byte("a2")})
	var claimed []byte
	if err := pool.QueryRow(ctx, "SELECT domain FROM "+schema+".claim(1, NULL, "+policy+") WHERE off IS NOT NULL").Scan(&claimed); err != nil || string(claimed) != "a" {
		t.Fatalf("the earlier version's claim: %.20q, %v", claimed, err)
	}
	exec("SELECT * FROM "+schema+".enqueue_many($1, $2, $3, NULL, "+policy+")",
		[][]byte{[]byte("b"), []byte(long)}, []int64{1, 7}, [][]byte{[]byte("b1"), []byte("long7")})
	exec("SELECT "+schema+".kill($1, 1, 'poison', true, NULL, "+policy+")", []byte("b"))
	exec("SELECT "+schema+".set_paused($1, true, NULL, "+policy+")", []byte("p"))

	m, err := OpenSchema(ctx, pool, name)
	if err != nil {
		t.Fatalf("Open of the earlier version's schema: %v", err)
	}
	defer m.Close()
	var pkey string
	if err := pool.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'domains_pkey'", name).Scan(&pkey); err != nil ||
		!strings.HasSuffix(pkey, "(key)") {
		t.Fatalf("the domains' primary key after the upgrade: %q, %v", pkey, err)
	}
	stats, err := m.Stats(ctx)
	if err != nil || stats.Enqueued != 4 || stats.Acquired != 1 || stats.Killed != 1 || stats.Paused != 1 {
		t.Fatalf("Stats after the upgrade: %+v, %v", stats, err)
	}
	ds, err := m.ListDomains(ctx, worklease.DomainQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ds.Domains {
		names = append(names, d.Domain)
	}
	if want := []string{long, "a", "b", "p"}; !slices.Equal(names, want) {
		t.Fatalf("ListDomains after the upgrade: %d domains %.20q; want %.20q", len(names), names, want)
	}
	if info, err := m.Inspect(ctx, "p"); err != nil || !info.Paused {
		t.Fatalf("Inspect(p) after the upgrade: %+v, %v", info, err)
	}
	leases, err := m.Leases(ctx)
	if err != nil || len(leases) != 1 || leases[0].Domain != "a" || leases[0].Offset != 1 {
		t.Fatalf("Leases after the upgrade: %+v, %v", leases, err)
	}
	if errs, err := m.SucceedMany(ctx, []worklease.Claim{{Domain: "a", Offset: 1, Token: leases[0].Token}}); err != nil || errs[0] != nil {
		t.Fatalf("SucceedMany of the lease granted before the upgrade: %v, %v", errs, err)
	}
	dl, err := m.InspectDeadLetter(ctx, "b", 1)
	if err != nil || string(dl.Payload) != "b1" || dl.Cause == nil || dl.Cause.Error() != "poison" {
		t.Fatalf("InspectDeadLetter(b, 1) after the upgrade: %+v, %v", dl, err)
	}
	if _, err := m.Redrive(ctx, "b", 1); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for len(got) < 3 {
		claims, err := m.Claim(ctx, 10)
		if err != nil || len(claims) == 0 {
			t.Fatalf("Claim after the upgrade, having %v: %v, %v", got, claims, err)
		}
		for _, c := range claims {
			got[fmt.Sprintf("%.1s/%d", c.Domain, c.Offset)] = string(c.Payload)
		}
		if errs, err := m.SucceedMany(ctx, claims); err != nil || errors.Join(errs...) != nil {
			t.Fatalf("SucceedMany: %v, %v", errs, err)
		}
	}
	if want := map[string]string{"a/2": "a2", "b/1": "b1", "L/7": "long7"}; !maps.Equal(got, want) {
		t.Fatalf("claims after the upgrade: %v; want %v", got, want)
	}
	incompressible := string(randomDomain(1))
	if st, err := m.Enqueue(ctx, incompressible, 1, []byte("x")); err != nil || st != worklease.Enqueued {
		t.Fatalf("Enqueue of a domain that does not compress, after the upgrade: %v, %v", st, err)
	}
}

// randomDomain returns a domain of MaxDomainLen bytes, from seed, that no
// compression shrinks and that is not UTF-8.
func randomDomain(seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0xd0))
	b := make([]byte, worklease.MaxDomainLen)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	b[0] = 0xff // never in UTF-8
	return b
}
