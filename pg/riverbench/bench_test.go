package riverbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// testPool returns a pool of conns connections on the server of
// WORKLEASE_PG_URL (make bench starts one), or skips the benchmark.
func testPool(b *testing.B, conns int32) *pgxpool.Pool {
	url := os.Getenv("WORKLEASE_PG_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			b.Fatal("WORKLEASE_PG_URL is not set: run the benchmarks with make, which starts a PostgreSQL server")
		}
		b.Skip("no PostgreSQL server: WORKLEASE_PG_URL is not set (make bench starts one and sets it)")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// newSchema creates a schema for b, dropped when b ends.
func newSchema(b *testing.B, pool *pgxpool.Pool) string {
	var r [6]byte
	rand.Read(r[:])
	name := "b_" + hex.EncodeToString(r[:])
	b.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			b.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return name
}

// report reports the rate at which b.N jobs finished since start.
func report(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// The number of domains the pull queue's jobs are spread over: each
// domain's offsets are worked in order, one at a time.
const burnDomains = 1000

// The workers of the pull queue's burn-down, each with a connection.
const burnWorkers = 16

// BenchmarkPullBurnDown burns down b.N offsets spread evenly over
// burnDomains domains, stored with EnqueueMany before the timer starts:
// burnWorkers workers each claim a batch of ready domains' heads, succeed
// them with ClaimNext, which leases the same domains' next offsets in the
// same call, and top the batch up with Claim; a worker that finds nothing
// ready waits with WaitClaim. The batch doubles while it comes back full
// and halves when it comes back short. Every domain's offsets finish in
// order, one at a time, under fenced leases.
func BenchmarkPullBurnDown(b *testing.B) { benchPull(b, false) }

// BenchmarkPullContinuous is BenchmarkPullBurnDown with the offsets
// stored while the workers run, by a producer that starts with the timer:
// the queue serving a stream.
func BenchmarkPullContinuous(b *testing.B) { benchPull(b, true) }

// benchPull burns down b.N offsets, stored before the timer starts or, if
// continuous, as the workers run.
func benchPull(b *testing.B, continuous bool) {
	// A worker's first claim, and the most it claims at once: its share of
	// the domains (a worker that claims more leaves others idle).
	const claimBatch, maxClaimBatch = 10, burnDomains / burnWorkers
	pool := testPool(b, burnWorkers+1)
	ctx := context.Background()
	schema := newSchema(b, pool)
	m, err := pg.OpenSchema(ctx, pool, schema)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close() // and the connection WaitClaim listens on
	// The producer stores offsets in batches, a round trip each; while the
	// workers run, in small ones: a batch locks each of its domains until
	// it commits, and the workers skip (claims) or wait for (completions)
	// those.
	batchSize := 1000
	if continuous {
		batchSize = 50
	}
	produce := func() error {
		var items []pg.Item
		for i := range b.N {
			items = append(items, pg.Item{Domain: fmt.Sprintf("domain-%04d", i%burnDomains), Offset: int64(i / burnDomains)})
			if len(items) == batchSize || i == b.N-1 {
				if _, err := m.EnqueueMany(ctx, items); err != nil {
					return err
				}
				items = items[:0]
			}
		}
		return nil
	}
	if !continuous {
		if err := produce(); err != nil {
			b.Fatal(err)
		}
	}
	var done atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	// Workers with nothing to do wait for work with WaitClaim; the last
	// completion (or a failure) ends their waits.
	work, stop := context.WithCancel(ctx)
	defer stop()
	fail := func(err error) {
		failed.CompareAndSwap(nil, &err)
		stop()
	}
	b.ResetTimer()
	start := time.Now()
	if continuous {
		wg.Go(func() {
			if err := produce(); err != nil {
				fail(err)
			}
		})
	}
	for range burnWorkers {
		wg.Go(func() {
			batch := claimBatch
			var next []worklease.Claim // what ClaimNext leased the worker
			for work.Err() == nil {
				claims := next
				if len(claims) < batch/2 { // top up the batch
					more, err := m.Claim(ctx, batch-len(claims))
					if err != nil {
						fail(err)
						return
					}
					claims = append(claims, more...)
				}
				if len(claims) == 0 { // nothing ready: wait for some
					var err error
					if claims, err = m.WaitClaim(work, batch, 0); err != nil {
						if work.Err() == nil {
							fail(err)
						}
						return
					}
				}
				var errs []error
				var err error
				next, errs, err = m.ClaimNext(ctx, claims)
				if err == nil {
					err = errors.Join(errs...)
				}
				if err != nil {
					fail(err)
					return
				}
				if done.Add(int64(len(claims))) == int64(b.N) {
					stop()
				}
				// The batch adapts to what is ready: it doubles while claims
				// come back full, and halves when they come back short.
				if len(claims) >= batch {
					batch = min(2*batch, maxClaimBatch)
				} else {
					batch = max(batch/2, claimBatch)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	report(b, start)
	// What the schema keeps on disk once every offset has finished: its
	// tables and indexes, dead versions not yet vacuumed included.
	var size int64
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "+
		"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'", schema).Scan(&size); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size)/float64(b.N), "disk-B/offset")
}

// riverArgs is the River job of BenchmarkRiverBurnDown.
type riverArgs struct {
	Num int `json:"num"`
}

func (riverArgs) Kind() string { return "benchmark" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
}

func (*riverWorker) Work(context.Context, *river.Job[riverArgs]) error { return nil }

// BenchmarkRiverBurnDown burns down b.N River jobs, inserted before the
// timer starts, with River's own benchmark settings (2,000 workers, a
// 2 ms fetch cooldown, a 20 ms poll): River's fetches and completions are
// batched, and its jobs have no order and no key.
func BenchmarkRiverBurnDown(b *testing.B) { benchRiver(b, false) }

// BenchmarkRiverContinuous is BenchmarkRiverBurnDown with the jobs
// inserted while the client works, starting with the timer.
func BenchmarkRiverContinuous(b *testing.B) { benchRiver(b, true) }

// benchRiver burns down b.N River jobs, inserted before the timer starts
// or, if continuous, as the client works.
func benchRiver(b *testing.B, continuous bool) {
	pool := testPool(b, 100)
	ctx := context.Background()
	schema := newSchema(b, pool)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	driver := riverpgxv5.New(pool)
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            quiet,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2_000}},
		Schema:            schema,
		Workers:           workers,
	})
	if err != nil {
		b.Fatal(err)
	}
	insert := func() error { // a thousand jobs a round trip
		batch := make([]river.InsertManyParams, 0, 1000)
		for i := range b.N {
			batch = append(batch, river.InsertManyParams{Args: riverArgs{Num: i}})
			if len(batch) == cap(batch) || i == b.N-1 {
				if _, err := client.InsertMany(ctx, batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		return nil
	}
	if !continuous {
		if err := insert(); err != nil {
			b.Fatal(err)
		}
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: b.N + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	inserted := make(chan error, 1)
	if continuous {
		go func() { inserted <- insert() }()
	} else {
		inserted <- nil
	}
	for range b.N {
		ev := <-events
		if ev.Kind != river.EventKindJobCompleted {
			b.Fatalf("a job ended %s", ev.Kind)
		}
	}
	b.StopTimer()
	if err := <-inserted; err != nil {
		b.Fatal(err)
	}
	report(b, start)
	if err := client.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}
