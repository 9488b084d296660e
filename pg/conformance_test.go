package pg_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	schemas := newSchemaPool(t, pool)
	app := pg.NewAppRole(t, pool)
	var mu sync.Mutex            // guards open: the suite's cases run in parallel
	open := make(map[string]int) // how many Managers are open on each schema taken from the pool
	hold := func(schema string) {
		mu.Lock()
		open[schema]++
		mu.Unlock()
	}
	// release gives the schema back to the pool once nothing holds it: no
	// Manager is open on it, and the test that took it has ended. The
	// model test is the exception: it calls New with its own t for every
	// case, and closes each case's Managers as the case ends, so its
	// schemas go back as their last Manager closes, and each case reuses
	// one rather than taking a new one.
	release := func(schema string) {
		mu.Lock()
		open[schema]--
		last := open[schema] == 0
		if last {
			delete(open, schema)
		}
		mu.Unlock()
		if last {
			schemas.put(schema)
		}
	}
	start := func(t *testing.T, schema string, opts ...worklease.Option) worklease.Backend {
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
		hold(schema)
		pm := &pooledManager{Manager: m, schema: schema, release: release}
		t.Cleanup(func() { _ = pm.Close() })
		return pm
	}
	leasetest.Run(t, leasetest.Suite{
		New: func(t *testing.T, opts ...worklease.Option) worklease.Backend {
			schema := schemas.take(t)
			if !strings.HasSuffix(t.Name(), "/Model") {
				hold(schema) // until t ends: t may close its Manager, then reopen it
				t.Cleanup(func() { release(schema) })
			}
			return start(t, schema, opts...)
		},
		Reopen: func(t *testing.T, b worklease.Backend, opts ...worklease.Option) worklease.Backend {
			schema := b.(*pooledManager).schema
			hold(schema) // the schema stays out of the pool while it restarts
			defer release(schema)
			_ = b.Close()
			return start(t, schema, opts...)
		},
		Events:   true,
		Payloads: true,
		Check: func(b worklease.Backend) error {
			return checkRows(context.Background(), pool, b.(*pooledManager).schema)
		},
	})
}

// A pooledManager is a Manager on a schema of TestConformance's pool,
// which it releases when it closes (once, however often it is closed).
type pooledManager struct {
	*pg.Manager
	schema  string
	closed  atomic.Bool // Close was called: its schema is released
	release func(schema string)
}

// Close closes the Manager and, the first time, releases its schema.
func (m *pooledManager) Close() error {
	err := m.Manager.Close()
	if !m.closed.Swap(true) {
		m.release(m.schema)
	}
	return err
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
