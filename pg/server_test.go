package pg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// serverURL is the environment variable that holds the URL of the
// PostgreSQL server the tests use; make test starts a throwaway one and
// sets it.
const serverURL = "WORKLEASE_PG_URL"

// testPool returns a pool on the test server, closed when t ends. Without
// a server the test is skipped, or fails under CI=true, where one must be
// there.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv(serverURL)
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: run the tests with make test, which starts a PostgreSQL server", serverURL)
		}
		t.Skipf("no PostgreSQL server: %s is not set (make test starts one and sets it)", serverURL)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newSchemaName returns the name of a schema no test has used.
func newSchemaName() string {
	var b [6]byte
	rand.Read(b[:])
	return "t_" + hex.EncodeToString(b[:])
}

// dropSchema drops schema and everything in it.
func dropSchema(t testing.TB, pool *pgxpool.Pool, schema string) {
	_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	if err != nil {
		t.Errorf("dropping schema %s: %v", schema, err)
	}
}

// A schemaPool hands out empty schemas, installed once and emptied for
// each reuse: installing one takes far longer than emptying it, and the
// model test wants a fresh backend for each of its cases.
type schemaPool struct {
	pool *pgxpool.Pool
	mu   sync.Mutex // guards free and all
	free []string   // installed, used, returned
	all  []string   // every schema handed out, to drop at the end
}

// newSchemaPool returns a schemaPool on pool whose schemas are dropped
// when t ends.
func newSchemaPool(t testing.TB, pool *pgxpool.Pool) *schemaPool {
	p := &schemaPool{pool: pool}
	t.Cleanup(func() {
		for _, s := range p.all {
			dropSchema(t, pool, s)
		}
	})
	return p
}

// get returns an empty schema for t, or the name of one to install, and
// takes it back when t ends.
func (p *schemaPool) get(t testing.TB) string {
	t.Helper()
	p.mu.Lock()
	var name string
	if n := len(p.free); n > 0 {
		name, p.free = p.free[n-1], p.free[:n-1]
	} else {
		name = newSchemaName()
		p.all = append(p.all, name)
	}
	p.mu.Unlock()
	t.Cleanup(func() {
		p.mu.Lock()
		p.free = append(p.free, name)
		p.mu.Unlock()
	})
	s := pgx.Identifier{name}.Sanitize()
	_, err := p.pool.Exec(context.Background(), `DO $$ BEGIN
		IF EXISTS (SELECT FROM pg_namespace WHERE nspname = `+quoteLiteral(name)+`) THEN
			TRUNCATE `+s+`.domains, `+s+`.backlog, `+s+`.dead_letters;
			ALTER SEQUENCE `+s+`.domain_serial RESTART;
			UPDATE `+s+`.meta SET counts = array_fill(0::bigint, ARRAY[16]),
				instance = 1 + floor(random() * 4611686018427387903)::bigint; -- tokens of a previous use never match
		END IF;
	END $$`)
	if err != nil {
		t.Fatalf("emptying schema %s: %v", name, err)
	}
	return name
}

// quoteLiteral quotes s as an SQL string literal; s has no quote in it.
func quoteLiteral(s string) string { return "'" + s + "'" }
