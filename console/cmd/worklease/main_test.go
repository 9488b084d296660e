package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
	"github.com/worklease/worklease/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The commands read a journal that a running Manager holds, and refuse to
// change it.
func TestJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	l, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := worklease.New(worklease.WithJournal(l), worklease.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Kill("bad\xff", 4, "boom\ttab"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire("tenant-1", 1); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "domains", "-wal", dir)
	if code != 0 || !strings.Contains(out, "\"bad\\xff\"\tparked") && !strings.Contains(out, "\"bad\\xff\"\tdead-lettered") || !strings.Contains(out, "tenant-1\tleased") {
		t.Errorf("domains: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCmd(t, "dead", "-wal", dir, "-json")
	if code != 0 || !strings.Contains(out, `"domain_base64":"YmFk/w=="`) || !strings.Contains(out, `"cause":"boom\ttab"`) {
		t.Errorf("dead -json: %d %q", code, out)
	}
	code, out, _ = runCmd(t, "inspect", "-wal", dir, "tenant-1")
	if code != 0 || !strings.Contains(out, "tenant-1\tfalse\t1\t") {
		t.Errorf("inspect: %d %q", code, out)
	}
	code, _, errOut = runCmd(t, "redrive", "-wal", dir, "bad\xff", "4")
	if code != 1 || !strings.Contains(errOut, "one writer") {
		t.Errorf("redrive on a journal: %d %q", code, errOut)
	}
	for _, args := range [][]string{{}, {"domains"}, {"nothing", "-wal", dir}, {"kill", "-wal", dir, "a"}, {"kill", "-wal", dir, "a", "x"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// The same commands, and the admin ones, against PostgreSQL.
func TestPostgres(t *testing.T) {
	url := os.Getenv("WORKLEASE_PG_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("WORKLEASE_PG_URL is not set")
		}
		t.Skip("no PostgreSQL server: WORKLEASE_PG_URL is not set")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	schema := "cmdtest_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	defer pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	m, err := pg.OpenSchema(ctx, pool, schema, worklease.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Enqueue(ctx, "t1", 1, []byte("payload\x00")); err != nil {
		t.Fatal(err)
	}
	c, err := m.Claim(ctx, 1)
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	if _, err := m.Retry(ctx, "t1", c[0].Token, errFailed, 0); err != nil {
		t.Fatal(err)
	}
	args := []string{"-dsn", url, "-schema", schema}
	code, out, errOut := runCmd(t, append([]string{"dead", "-payloads"}, args...)...)
	if code != 0 || !strings.Contains(out, "t1\t1\t1\t") || !strings.Contains(out, `"payload\x00"`) {
		t.Errorf("dead: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCmd(t, append([]string{"redrive"}, append(args, "t1", "1")...)...)
	if code != 0 || !strings.Contains(out, "t1\tredrive") {
		t.Errorf("redrive: %d %q %q", code, out, errOut)
	}
	info, err := m.Inspect(ctx, "t1")
	if err != nil || len(info.Backlog) != 1 || info.Failed != 0 {
		t.Errorf("after redrive: %+v %v", info, err)
	}
	for _, cmd := range [][]string{{"pause", "t1"}, {"resume", "t1"}, {"kill", "t1", "1"}} {
		if code, _, errOut := runCmd(t, append(append([]string{cmd[0]}, args...), cmd[1:]...)...); code != 0 {
			t.Errorf("%v: %d %s", cmd, code, errOut)
		}
	}
	code, _, errOut = runCmd(t, append([]string{"force-release"}, append(args, "t1")...)...)
	if code != 1 || !strings.Contains(errOut, "no lease") {
		t.Errorf("force-release of an idle domain: %d %q", code, errOut)
	}
	code, out, _ = runCmd(t, append([]string{"domains", "-json", "-state", "dead-lettered"}, args...)...)
	if code != 0 || !strings.Contains(out, `"domain":"t1"`) {
		t.Errorf("domains: %d %q", code, out)
	}
}

type failed struct{}

func (failed) Error() string { return "failed" }

var errFailed error = failed{}
