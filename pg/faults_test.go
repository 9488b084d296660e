package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	schema := newSchemaName()
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	ctx := context.Background()
	m, err := pg.OpenSchema(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
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
