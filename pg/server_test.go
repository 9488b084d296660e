package pg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
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

// newManager opens a Manager on a schema of its own, dropped when t ends,
// and returns it with the schema's name.
func newManager(t testing.TB, pool *pgxpool.Pool, opts ...worklease.Option) (*pg.Manager, string) {
	t.Helper()
	schema := newSchemaName()
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	m, err := pg.OpenSchema(context.Background(), pool, schema, opts...)
	if err != nil {
		t.Fatal(err)
	}
	// Close ends the Manager's vacuum, if one runs, before the schema goes.
	t.Cleanup(func() { _ = m.Close() })
	return m, schema
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
// model test wants a fresh backend for each of its cases. Reuse matters
// for long runs too: every schema a server process has used grows its
// caches, so that a run of hundreds of cases each on a new schema slows
// down as it goes.
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

// take returns an empty schema, or the name of one to install, for t to
// use until it gives the schema back with put.
func (p *schemaPool) take(t testing.TB) string {
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
	s := pgx.Identifier{name}.Sanitize()
	// Every table but the schema's settings and its migrations is emptied,
	// those a later migration adds included: a table left full (Append's
	// idempotency keys once were) would answer for the case before.
	_, err := p.pool.Exec(context.Background(), `DO $$ DECLARE tables text; BEGIN
		IF EXISTS (SELECT FROM pg_namespace WHERE nspname = `+quoteLiteral(name)+`) THEN
			SELECT string_agg(format('%I.%I', t.schemaname, t.tablename), ', ') INTO tables
			FROM pg_tables t WHERE t.schemaname = `+quoteLiteral(name)+` AND t.tablename NOT IN ('meta', 'migrations');
			EXECUTE 'TRUNCATE ' || tables;
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

// put gives back name, which take returned and nothing uses any more.
func (p *schemaPool) put(name string) {
	p.mu.Lock()
	p.free = append(p.free, name)
	p.mu.Unlock()
}

// quoteLiteral quotes s as an SQL string literal; s has no quote in it.
func quoteLiteral(s string) string { return "'" + s + "'" }

// A privateServer is a PostgreSQL server of one test's own, for a test
// that stops or restarts it. It uses the programs and the user of the test
// server (see scripts/with-postgres).
type privateServer struct {
	bin, user string // the programs' directory; the user that runs them, if not this one
	dir       string // the data directory's parent, which holds its socket and log
	port      int
	opts      string // more of the server's settings, as postgres's command-line options
	URL       string
}

// startPrivateServer starts a server for t, in a temporary directory,
// stopped and removed when t ends. Without a test server's programs the
// test is skipped, or fails under CI=true.
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	s := newPrivateServer(t)
	s.initdb(t)
	if err := s.pgCtl("start"); err != nil {
		t.Fatal(err)
	}
	return s
}

// initdb makes the server's data directory, for a server that is not a
// standby's copy of another.
func (s *privateServer) initdb(t *testing.T) {
	t.Helper()
	if out, err := s.command("initdb", "-D", s.data(), "-U", "worklease", "-A", "trust", "-E", "UTF8", "--no-locale").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
}

// newPrivateServer returns a server for t, with a temporary directory and
// a port, that it neither initializes nor starts; it is stopped and its
// directory removed when t ends. Without a test server's programs the test
// is skipped, or fails under CI=true.
func newPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	bin := os.Getenv("WORKLEASE_PG_BIN")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("WORKLEASE_PG_BIN is not set: run the tests with make test, which sets it")
		}
		t.Skip("WORKLEASE_PG_BIN is not set (make test sets it)")
	}
	s := &privateServer{bin: bin, user: os.Getenv("WORKLEASE_PG_USER")}
	dir, err := os.MkdirTemp("", "worklease-pg-private")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.pgCtl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	s.dir = dir
	if s.user != "" {
		if out, err := exec.Command("chown", s.user, dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v: %s", err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.URL = fmt.Sprintf("postgres://worklease@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	return s
}

func (s *privateServer) data() string { return filepath.Join(s.dir, "data") }

// command returns the command that runs PostgreSQL's program name, as the
// server's user.
func (s *privateServer) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.user == "" {
		return exec.Command(path, args...)
	}
	return exec.Command("runuser", append([]string{"-u", s.user, "--", path}, args...)...)
}

// pgCtl runs pg_ctl with args; start starts the server as the test server
// is started.
func (s *privateServer) pgCtl(args ...string) error {
	if args[0] == "start" {
		args = append(args, "-l", filepath.Join(s.dir, "server.log"), "-t", "60",
			"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=on %s", s.port, s.dir, s.opts))
	}
	out, err := s.command("pg_ctl", append([]string{"-D", s.data(), "-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", args[0], err, out)
	}
	return nil
}

// crash stops the server at once, as a crash of its processes would (no
// checkpoint: its next start recovers from its write-ahead log), and
// starts it again.
func (s *privateServer) crash() error {
	if err := s.pgCtl("stop", "-m", "immediate"); err != nil {
		return err
	}
	return s.pgCtl("start")
}
