package pg_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// A rolled-back transaction leaves nothing of the offsets EnqueueTx and
// EnqueueManyTx stored in it: no backlog, no payloads, no domain, the same
// counts. Until it ends, nothing of it is seen outside it. An invalid
// input is refused before it reaches the database, and the transaction
// goes on.
func TestEnqueueTxRolledBack(t *testing.T) {
	pool := testPool(t)
	m, schema := newManager(t, pool)
	ctx := context.Background()
	if st, err := m.Enqueue(ctx, "old", 1, []byte("o1")); err != nil || st != worklease.Enqueued {
		t.Fatalf("Enqueue: %v, %v", st, err)
	}
	stats, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, err := m.Inspect(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	rows := func() string {
		t.Helper()
		var out []string
		for _, table := range []string{"domains", "backlog", "payloads"} {
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, table}.Sanitize()).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %d", table, n))
		}
		return strings.Join(out, ", ")
	}
	before := rows()

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if st, err := m.EnqueueTx(ctx, tx, "new", 1, []byte("n1")); err != nil || st != worklease.Enqueued {
		t.Fatalf("EnqueueTx: %v, %v", st, err)
	}
	st, err := m.EnqueueManyTx(ctx, tx, []pg.Item{{Domain: "old", Offset: 2, Payload: []byte("o2")}, {Domain: "new", Offset: 2}, {Domain: "other", Offset: 1, Payload: []byte("x")}})
	if err != nil || !slices.Equal(st, []worklease.AcquireStatus{worklease.Enqueued, worklease.Enqueued, worklease.Enqueued}) {
		t.Fatalf("EnqueueManyTx: %v, %v", st, err)
	}
	if _, err := m.EnqueueTx(ctx, tx, "", 1, nil); !errors.Is(err, worklease.ErrInvalidDomain) {
		t.Errorf("EnqueueTx of the empty domain: %v; want ErrInvalidDomain", err)
	}
	if _, err := m.EnqueueManyTx(ctx, tx, []pg.Item{{Domain: "new", Offset: 3}, {Domain: "new", Offset: -1}}); !errors.Is(err, worklease.ErrInvalidOffset) {
		t.Errorf("EnqueueManyTx with a negative offset: %v; want ErrInvalidOffset", err)
	}
	var inTx int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "backlog"}.Sanitize()).Scan(&inTx); err != nil || inTx != 5 {
		t.Fatalf("the backlog in the transaction, after the refused calls: %d rows, %v; want 5", inTx, err)
	}
	if ds, err := m.Domains(ctx); err != nil || !slices.Equal(ds, []string{"old"}) {
		t.Errorf("Domains outside the transaction: %q, %v; want only old", ds, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	if after := rows(); after != before {
		t.Errorf("rows after the rollback: %s; before: %s", after, before)
	}
	if ds, err := m.Domains(ctx); err != nil || !slices.Equal(ds, []string{"old"}) {
		t.Errorf("Domains after the rollback: %q, %v; want only old", ds, err)
	}
	if info, err := m.Inspect(ctx, "old"); err != nil || !equalInfo(info, old) {
		t.Errorf("Inspect(old) after the rollback: %+v, %v; want %+v", info, err, old)
	}
	if got, err := m.Stats(ctx); err != nil || got != stats {
		t.Errorf("Stats after the rollback: %+v, %v; want %+v", got, err, stats)
	}
	claims, err := m.Claim(ctx, 10)
	if err != nil || len(claims) != 1 || claims[0].Domain != "old" || claims[0].Offset != 1 {
		t.Fatalf("Claim after the rollback: %v, %v; want old/1 alone", claims, err)
	}
}

func equalInfo(a, b worklease.DomainInfo) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// Work enqueued in a transaction beside the application's own row is
// stored with it when the transaction commits, and another process's
// Manager, waiting for work, is woken by the commit and claims it.
func TestEnqueueTxCommitted(t *testing.T) {
	pool := testPool(t)
	m, schema := newManager(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	// The other process: a pool of its own, whose claims are counted, and
	// whose connections say whose they are.
	app := "tx_" + newSchemaName()
	var claimed atomic.Int32
	other := otherProcess(t, pool, app, &claimed)
	worker, err := pg.OpenSchema(ctx, other, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	pg.WaitOnNotifications(worker)
	done := make(chan waited, 1)
	go func() {
		cs, err := worker.WaitClaim(ctx, 10, time.Hour) // only a wake-up ends its wait
		done <- waited{cs, err}
	}()
	// It has claimed once, found nothing, and listens.
	for claimed.Load() == 0 || !listening(t, pool, app) {
		select {
		case w := <-done:
			t.Fatalf("WaitClaim returned with nothing to claim: %v, %v", w.claims, w.err)
		case <-time.After(10 * time.Millisecond):
		}
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	if st, err := m.EnqueueTx(ctx, tx, "order-7", 1, []byte("ship")); err != nil || st != worklease.Enqueued {
		t.Fatalf("EnqueueTx: %v, %v", st, err)
	}
	if st, err := m.EnqueueManyTx(ctx, tx, []pg.Item{{Domain: "mail-7", Offset: 1, Payload: []byte("mail")}, {Domain: "bill-7", Offset: 1}}); err != nil ||
		!slices.Equal(st, []worklease.AcquireStatus{worklease.Enqueued, worklease.Enqueued}) {
		t.Fatalf("EnqueueManyTx: %v, %v", st, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-done
	if w.err != nil {
		t.Fatalf("WaitClaim after the commit: %v", w.err)
	}
	got := map[string]string{}
	for _, c := range w.claims {
		got[fmt.Sprintf("%s/%d", c.Domain, c.Offset)] = string(c.Payload)
	}
	if want := map[string]string{"order-7/1": "ship", "mail-7/1": "mail", "bill-7/1": ""}; !maps.Equal(got, want) {
		t.Fatalf("the other process's WaitClaim claimed %v; want %v", got, want)
	}
	if errs, err := worker.SucceedMany(ctx, w.claims); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("SucceedMany: %v, %v", errs, err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+orders).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the application's row: %d, %v", n, err)
	}
}

// EnqueueTx holds its domain's row until the transaction ends: claims of
// every process skip the domain meanwhile, and take it after the commit.
func TestEnqueueTxHoldsItsDomain(t *testing.T) {
	pool := testPool(t)
	m, schema := newManager(t, pool)
	ctx := context.Background()
	if st, err := m.Enqueue(ctx, "busy", 1, nil); err != nil || st != worklease.Enqueued {
		t.Fatalf("Enqueue: %v, %v", st, err)
	}
	worker, err := pg.OpenSchema(ctx, otherProcess(t, pool, "tx_hold", nil), schema)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if st, err := m.EnqueueTx(ctx, tx, "busy", 2, nil); err != nil || st != worklease.Enqueued {
		t.Fatalf("EnqueueTx: %v, %v", st, err)
	}
	if cs, err := worker.Claim(ctx, 10); err != nil || len(cs) != 0 {
		t.Fatalf("Claim while the transaction holds the domain: %v, %v; want nothing", cs, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := worker.Claim(ctx, 10)
	if err != nil || len(cs) != 1 || cs[0].Domain != "busy" || cs[0].Offset != 1 {
		t.Fatalf("Claim after the commit: %v, %v; want busy/1", cs, err)
	}
	if info, err := worker.Inspect(ctx, "busy"); err != nil || !slices.Equal(info.Backlog, []int64{2}) {
		t.Fatalf("Inspect after the commit: %+v, %v; want 2 queued", info, err)
	}
}

type waited struct {
	claims []worklease.Claim
	err    error
}

// otherProcess returns a pool as another process would have one, on the
// server of pool, whose connections are named app; if claims is not nil,
// it counts the claims they make.
func otherProcess(t *testing.T, pool *pgxpool.Pool, app string, claims *atomic.Int32) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config()
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	if claims != nil {
		cfg.ConnConfig.Tracer = claimCounter{claims}
	}
	return newPool(t, cfg)
}

// A claimCounter counts the claims of a connection: the statements that
// lock ready domains, skipping those another call holds.
type claimCounter struct{ n *atomic.Int32 }

func (c claimCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "SKIP LOCKED") {
		return context.WithValue(ctx, claimCounter{}, true)
	}
	return ctx
}

func (c claimCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(claimCounter{}) != nil {
		c.n.Add(1)
	}
}

// listening reports whether a connection named app listens for the
// notifications of ready domains.
func listening(t *testing.T, pool *pgxpool.Pool, app string) bool {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'",
		app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// newPool returns a pool made with cfg, closed when t ends.
func newPool(t *testing.T, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// AppendTx assigns an offset, and keeps its idempotency key, if and only
// if its transaction commits: a rolled-back Append leaves its offset to
// the next one and its key unknown. Appends of two transactions on one
// domain take their offsets in the order they commit, the second waiting
// for the first.
func TestAppendTx(t *testing.T) {
	pool := testPool(t)
	m, _ := newManager(t, pool)
	ctx := context.Background()
	appendIn := func(tx pgx.Tx, payload, key string) worklease.AppendResult {
		t.Helper()
		res, err := m.AppendTx(ctx, tx, "orders", []byte(payload), worklease.AppendOptions{Key: key})
		if err != nil {
			t.Fatalf("AppendTx(%q): %v", payload, err)
		}
		return res
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res := appendIn(tx, "rolled back", "k"); res != (worklease.AppendResult{Offset: 0, Status: worklease.Enqueued}) {
		t.Fatalf("AppendTx: %+v", res)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AppendTx(ctx, nil, "", nil, worklease.AppendOptions{}); !errors.Is(err, worklease.ErrInvalidDomain) {
		t.Fatalf("AppendTx of an empty domain: %v; want ErrInvalidDomain", err)
	}

	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	if res := appendIn(first, "first", "k"); res.Offset != 0 || res.Status != worklease.Enqueued {
		t.Fatalf("AppendTx after a rollback: %+v; want offset 0, its key unknown", res)
	}
	second := make(chan worklease.AppendResult, 1)
	go func() {
		res, err := m.Append(ctx, "orders", []byte("second"), worklease.AppendOptions{Key: "k2"})
		if err != nil {
			t.Error(err)
		}
		second <- res
	}()
	select {
	case res := <-second:
		t.Fatalf("Append while a transaction holds the domain: %+v; want it to wait", res)
	case <-time.After(100 * time.Millisecond):
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-second; res.Offset != 1 || res.Status != worklease.Enqueued {
		t.Fatalf("Append after the commit: %+v; want offset 1", res)
	}
	if res, err := m.Append(ctx, "orders", []byte("first"), worklease.AppendOptions{Key: "k"}); err != nil ||
		res != (worklease.AppendResult{Offset: 0, Status: worklease.AlreadyQueued}) {
		t.Fatalf("Append repeating the committed key: %+v, %v", res, err)
	}
	var got []string
	for range 2 {
		cs, err := m.Claim(ctx, 1)
		if err != nil || len(cs) != 1 {
			t.Fatalf("Claim: %v, %v", cs, err)
		}
		got = append(got, fmt.Sprintf("%d:%s", cs[0].Offset, cs[0].Payload))
		if _, err := m.Succeed(ctx, cs[0].Domain, cs[0].Token); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"0:first", "1:second"}; !slices.Equal(got, want) {
		t.Fatalf("claims: %v; want %v", got, want)
	}
}
