package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// A call whose connection dies after the call reached the database says
// that its outcome is unknown, changes nothing if its transaction did not
// commit, and leaves the Manager working: the next call takes another
// connection. Here the call waits for the domain's row, which the test
// holds, when the server ends its connection.
func TestDroppedConnection(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	m, schema := newManager(t, pool)
	first, err := m.TryAcquire(ctx, "d", 1)
	if err != nil {
		t.Fatal(err)
	}

	// Hold the domain's row, as a call of another process would.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	var holderPID int
	if err := holder.QueryRow(ctx, "SELECT pg_backend_pid() FROM "+pgx.Identifier{schema}.Sanitize()+".domains WHERE domain = $1 FOR UPDATE",
		[]byte("d")).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Succeed(ctx, "d", first.Token)
		done <- err
	}()
	// End the waiting call's connection from the server's side.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "+
			"WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid))", holderPID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never waited for the row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = <-done
	if !errors.Is(err, pg.ErrOutcomeUnknown) {
		t.Fatalf("Succeed on a dropped connection: %v, want ErrOutcomeUnknown", err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// It did not commit: the lease is still held, and its holder finishes it.
	info, err := m.Inspect(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Leased || info.Lease.Token != first.Token || info.Processed != 0 {
		t.Fatalf("after the dropped call: %+v; want the lease under %v, nothing processed", info, first.Token)
	}
	if _, err := m.Succeed(ctx, "d", first.Token); err != nil {
		t.Fatalf("Succeed after the dropped call: %v", err)
	}
	res, err := m.TryAcquire(ctx, "d", 1)
	if err != nil || res.Status != worklease.AlreadyProcessed {
		t.Fatalf("TryAcquire of the finished offset: %v, %v", res.Status, err)
	}
}

// A server that crashes and restarts while workers are mid-call loses
// nothing a call acknowledged, and each call that fails says whether it
// may have happened: one that returns an error other than
// ErrOutcomeUnknown changed nothing. Workers run cycles on domains of
// their own through the crash; each failed call is settled by repeating
// it once the server is back, which tells what the failed one did.
func TestServerRestart(t *testing.T) {
	const workers, domains, cycles = 8, 4, 60
	srv := startPrivateServer(t)
	cfg, err := pgxpool.ParseConfig(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	m, err := pg.Open(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}

	var unknown, refused atomic.Int64 // calls that failed, by kind
	var mu sync.Mutex                 // guards acked
	acked := make(map[string]int64)   // each domain's offsets up to this one were acknowledged as done
	// settle repeats call until it gets an answer, counting the failures,
	// which must be ErrOutcomeUnknown or, when the call changed nothing,
	// any other error; it returns the answer, and whether a failure may
	// have happened.
	settle := func(call func() error) (err error, maybe bool) {
		for {
			err := call()
			switch {
			case errors.Is(err, pg.ErrOutcomeUnknown):
				unknown.Add(1)
				maybe = true
			case err != nil && !errors.Is(err, worklease.ErrNoLease) && !errors.Is(err, worklease.ErrTokenMismatch):
				refused.Add(1)
			default:
				return err, maybe
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	var done atomic.Int64 // cycles acknowledged, by every worker
	var failed atomic.Pointer[string]
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failed.CompareAndSwap(nil, &msg)
	}
	for w := range workers {
		wg.Go(func() {
			for i := range cycles * domains {
				domain, offset := fmt.Sprintf("w%d-d%d", w, i%domains), int64(i/domains)
				var res worklease.AcquireResult
				_, maybe := settle(func() (err error) {
					res, err = m.TryAcquire(ctx, domain, offset)
					return err
				})
				// A grant that failed with any error but ErrOutcomeUnknown did
				// not happen: the repeat makes it.
				if res.Status != worklease.Acquired && !(maybe && res.Status == worklease.AlreadyAcquired) {
					fail("TryAcquire(%s, %d) after failures (outcome unknown: %v): %v", domain, offset, maybe, res.Status)
					return
				}
				err, maybe := settle(func() error {
					_, err := m.Succeed(ctx, domain, res.Token)
					return err
				})
				// A Succeed that failed with any error but ErrOutcomeUnknown
				// did not happen: the repeat makes it. One whose outcome is
				// unknown may have: the repeat then finds no lease.
				if err != nil && !(maybe && errors.Is(err, worklease.ErrNoLease)) {
					fail("Succeed(%s, %d) after failures (outcome unknown: %v): %v", domain, offset, maybe, err)
					return
				}
				mu.Lock()
				acked[domain] = offset
				mu.Unlock()
				done.Add(1)
			}
		})
	}
	// Crash the server once the workers are well under way: a quarter of
	// their cycles acknowledged, the rest to come. (A fixed pause could
	// see them through on a quiet machine, where a commit costs little.)
	for deadline := time.Now().Add(time.Minute); done.Load() < workers*domains*cycles/4; time.Sleep(time.Millisecond) {
		if failed.Load() != nil || time.Now().After(deadline) {
			break // a worker failed (reported below), or a minute passed: crash now
		}
	}
	if err := srv.crash(); err != nil {
		t.Error(err)
	}
	wg.Wait()
	if msg := failed.Load(); msg != nil {
		t.Fatal(*msg)
	}
	if unknown.Load()+refused.Load() == 0 {
		t.Fatal("no call failed: the crash came after the work")
	}
	t.Logf("calls failed by the crash: %d with their outcome unknown, %d refused", unknown.Load(), refused.Load())

	// Every acknowledged offset is done, and nothing else happened.
	for domain, last := range acked {
		info, err := m.Inspect(ctx, domain)
		if err != nil {
			t.Fatal(err)
		}
		if info.Leased || len(info.Backlog) > 0 || info.Processed != last+1 {
			t.Errorf("domain %s after the crash: %+v; want offsets 0 to %d processed, nothing else", domain, info, last)
		}
	}
	if len(acked) != workers*domains {
		t.Errorf("%d domains acknowledged offsets; want %d", len(acked), workers*domains)
	}
}
