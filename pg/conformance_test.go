package pg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/leasetest"
	"github.com/worklease/worklease/pg"
)

// The PostgreSQL Manager keeps the lease contract: the conformance suite,
// each backend on a schema of its own, which a restart reopens. The
// backends run as an application's role often does, one that may use the
// schema but owns nothing and may create nothing, with the rights the
// PostgreSQL doc (docs/postgres.md) lists; the schema's owner installs
// it first.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	schemaPool := newSchemaPool(t, pool)
	app := pg.NewAppRole(t, pool)
	var mu sync.Mutex // guards schemas: the suite's cases run in parallel
	schemas := make(map[worklease.Backend]string)
	open := func(t *testing.T, schema string, opts ...worklease.Option) worklease.Backend {
		ctx := context.Background()
		installer, err := pg.OpenSchema(ctx, pool, schema)
		if err != nil {
			t.Fatal(err)
		}
		_ = installer.Close()
		app.Grant(t, schema)
		m, err := pg.OpenSchema(ctx, app.Pool, schema, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		mu.Lock()
		schemas[m] = schema
		mu.Unlock()
		return m
	}
	leasetest.Run(t, leasetest.Suite{
		New: func(t *testing.T, opts ...worklease.Option) worklease.Backend {
			return open(t, schemaPool.get(t), opts...)
		},
		Reopen: func(t *testing.T, b worklease.Backend, opts ...worklease.Option) worklease.Backend {
			_ = b.Close()
			mu.Lock()
			schema := schemas[b]
			mu.Unlock()
			return open(t, schema, opts...)
		},
		Events:   true,
		Payloads: true,
		Check: func(b worklease.Backend) error {
			mu.Lock()
			schema := schemas[b]
			mu.Unlock()
			return checkRows(context.Background(), pool, schema)
		},
	})
}

// checkRows checks what every domain's row keeps of its other tables, as
// the fast statements and claims rely on: its counts of queued offsets and
// dead letters, whether its lease has a payload, and that it is ready for
// claims exactly when it is idle, running and has offsets queued.
func checkRows(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	s := pgx.Identifier{schema}.Sanitize()
	rows, err := pool.Query(ctx, "SELECT d.domain, d.queued, d.failed, "+
		"(SELECT count(*) FROM "+s+".backlog b WHERE b.key = d.key AND b.domain = d.domain), "+
		"(SELECT count(*) FROM "+s+".dead_letters f WHERE f.key = d.key AND f.domain = d.domain), "+
		"d.lease_payload IS DISTINCT FROM (d.lease_off IS NOT NULL AND "+
		"EXISTS (SELECT FROM "+s+".payloads p WHERE p.key = d.key AND p.domain = d.domain AND p.off = d.lease_off)), "+
		"(d.ready_at IS NOT NULL) <> (d.lease_off IS NULL AND d.queued > 0 AND NOT d.paused) "+
		"FROM "+s+".domains d")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var domain []byte
		var queued, failed int32
		var backlog, dead int64
		var badPayload, badReady bool
		if err := rows.Scan(&domain, &queued, &failed, &backlog, &dead, &badPayload, &badReady); err != nil {
			return err
		}
		switch {
		case int64(queued) != backlog || int64(failed) != dead:
			return fmt.Errorf("domain %q counts %d queued and %d failed; its tables hold %d and %d", domain, queued, failed, backlog, dead)
		case badPayload:
			return fmt.Errorf("domain %q: its lease's payload flag is wrong", domain)
		case badReady:
			return fmt.Errorf("domain %q: ready for claims when it should not be, or not when it should", domain)
		}
	}
	return rows.Err()
}
