package pg

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// scratchSchema returns a pool on the server of WORKLEASE_PG_URL, closed
// when t ends, and the name of a schema of t's own that starts with prefix,
// dropped when t ends. Without a server it skips t, or fails it under
// CI=true, as the package's other tests do.
func scratchSchema(t *testing.T, prefix string) (context.Context, *pgxpool.Pool, string) {
	t.Helper()
	url := os.Getenv("WORKLEASE_PG_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("WORKLEASE_PG_URL is not set: run the tests with make test, which starts a PostgreSQL server")
		}
		t.Skip("no PostgreSQL server: WORKLEASE_PG_URL is not set (make test starts one and sets it)")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	name := fmt.Sprintf("%s_%x", prefix, newInstance())
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	return ctx, pool, name
}

// An AppRole is a database role as an application's often is: it owns
// nothing, may create nothing, and has on each schema it is granted the
// rights docs/postgres.md lists. It is exported for the package's external
// tests too.
type AppRole struct {
	name  string
	owner *pgxpool.Pool // of the role that makes and drops it
	Pool  *pgxpool.Pool // connects as the role
}

// NewAppRole makes an AppRole with owner, and drops it when t ends.
func NewAppRole(t testing.TB, owner *pgxpool.Pool) *AppRole {
	t.Helper()
	ctx := context.Background()
	r := &AppRole{name: fmt.Sprintf("app_%x", newInstance()), owner: owner}
	if _, err := owner.Exec(ctx, "CREATE ROLE "+r.name+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := owner.Exec(ctx, "DROP OWNED BY "+r.name+"; DROP ROLE "+r.name); err != nil {
			t.Error(err)
		}
	})
	cfg := owner.Config()
	cfg.ConnConfig.User = r.name
	r.Pool = newPool(t, cfg) // closed before the role is dropped
	return r
}

// Grant gives r its rights on schema, installed.
func (r *AppRole) Grant(t testing.TB, schema string) {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := r.owner.Exec(context.Background(), "GRANT USAGE ON SCHEMA "+s+" TO "+r.name+";"+
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "+s+" TO "+r.name+";"+
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA "+s+" TO "+r.name); err != nil {
		t.Fatal(err)
	}
}

// userPool returns the pool of a new AppRole granted schema.
func userPool(t *testing.T, pool *pgxpool.Pool, schema string) *pgxpool.Pool {
	t.Helper()
	r := NewAppRole(t, pool)
	r.Grant(t, schema)
	return r.Pool
}

// waitFor waits until done, and fails t with what if that takes ten
// seconds.
func waitFor(t testing.TB, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

// newPool returns a pool made with cfg, closed when t ends.
func newPool(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// open opens a Manager on pool with its state in schema, closed when t
// ends (before pool, if t made pool first).
func open(t testing.TB, pool *pgxpool.Pool, schema string) *Manager {
	t.Helper()
	m, err := OpenSchema(context.Background(), pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}
