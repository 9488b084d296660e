package pg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A replicaSet is a primary and a hot standby of one test's own, on
// 127.0.0.1, the standby streaming the primary's write-ahead log, as
// pg_basebackup -R sets it up: synchronously (a commit is acknowledged
// once the standby has it on disk) or asynchronously (the standby may
// lag). Both are stopped and removed when the test ends.
type replicaSet struct {
	primary, standby *privateServer
	// URL names both servers, the primary first, for whichever takes
	// writes (target_session_attrs=read-write): after a failover, the
	// promoted standby.
	URL string
}

// startReplicaSet starts a primary and a standby for t.
func startReplicaSet(t *testing.T, synchronous bool) *replicaSet {
	t.Helper()
	p := newPrivateServer(t)
	p.initdb(t)
	if synchronous {
		// Every commit waits for a standby: the one there is.
		p.opts = "-c synchronous_standby_names='*'"
	}
	if err := p.pgCtl("start"); err != nil {
		t.Fatal(err)
	}
	s := newPrivateServer(t)
	if out, err := s.command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-U", "worklease",
		"-D", s.data(), "-R", "-X", "stream", "-c", "fast").CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v: %s", err, out)
	}
	// A standby that lost its primary tries again to reach it every
	// wal_retrieve_retry_interval (5 s by default), and a promotion waits
	// for the try under way: a promotion then takes up to that long.
	s.opts = "-c wal_retrieve_retry_interval=100ms"
	if err := s.pgCtl("start"); err != nil {
		t.Fatal(err)
	}
	rs := &replicaSet{primary: p, standby: s, URL: fmt.Sprintf(
		"postgres://worklease@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		p.port, s.port)}
	// Wait until the standby streams (and, if synchronous, the primary's
	// commits wait for it), so that the test starts from a set that
	// replicates.
	want := "async"
	if synchronous {
		want = "sync"
	}
	waitFor(t, time.Minute, "the standby to stream", func() (bool, error) {
		var n int
		err := queryServer(p, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1", []any{want}, &n)
		return n == 1, err
	})
	return rs
}

// queryServer runs query on a connection of its own to s and scans its
// one row into dest.
func queryServer(s *privateServer, query string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, query, args...).Scan(dest...)
}

// execServer runs each statement on a connection of its own to s.
func execServer(s *privateServer, statements ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, st := range statements {
		if _, err := conn.Exec(ctx, st); err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
	return nil
}

// waitFor calls cond until it reports true, failing t if it returns an
// error or if limit passes first: a bound on a failure, not a pace.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// disconnectStandby stops the standby's WAL receiver, so that it receives
// nothing more of the primary's log, and waits until it has replayed what
// it received: what the primary commits from then on, and acknowledges
// (asynchronously), a promotion of the standby loses.
func (rs *replicaSet) disconnectStandby(t *testing.T) {
	t.Helper()
	if err := execServer(rs.standby, "ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the standby to stop receiving", func() (bool, error) {
		var receiving, replayed bool
		err := queryServer(rs.standby, "SELECT EXISTS (SELECT FROM pg_stat_wal_receiver), "+
			"pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()", nil, &receiving, &replayed)
		return !receiving && replayed, err
	})
}

// killPrimary ends every process of the primary at once with SIGKILL, as
// the crash of its machine would: its clients' connections break, and
// nothing it has not sent to the standby survives a promotion.
func (rs *replicaSet) killPrimary(t *testing.T) {
	t.Helper()
	if err := rs.primary.kill(); err != nil {
		t.Fatal(err)
	}
}

// promote makes the standby a primary (pg_ctl promote) and returns once it
// takes writes.
func (rs *replicaSet) promote(t *testing.T) {
	t.Helper()
	if err := rs.standby.pgCtl("promote"); err != nil {
		t.Fatal(err)
	}
}

// kill sends SIGKILL to the server's postmaster and to each of its
// processes, by their process IDs.
func (s *privateServer) kill() error {
	text, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(string(text), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %q: %w", first, err)
	}
	children, err := childProcesses(pid)
	if err != nil {
		return err
	}
	if err := killPID(pid); err != nil {
		return err
	}
	for _, c := range children {
		_ = killPID(c) // it may have ended with the postmaster
	}
	return nil
}

// childProcesses returns the IDs of the processes whose parent is pid.
func childProcesses(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // it ended
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out, nil
}

// newReplicaPool returns a pool on url of up to n connections, closed when
// t ends.
func newReplicaPool(t *testing.T, url string, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
