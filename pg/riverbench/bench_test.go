package riverbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
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
	"github.com/worklease/worklease/worker"
)

// Each benchmark burns down b.N jobs spread evenly over benchDomains
// domains, with a handler that does nothing or sleeps a millisecond, as a
// call to a service might: stored before the timer starts (BurnDown), or
// while the jobs run (Continuous), by river bench's producer, which tops
// the jobs waiting up to continuousBacklog every continuousEvery. Each
// side runs through the API its users run: the worker Pool over the pg
// Manager, River's client. The hand-written loop over the Manager's batch
// calls (BenchmarkFloorBurnDown) is the floor the Pool is measured
// against, not a way anyone is meant to use the library.
//
// A continuous run reports too how much of its time its producer spent
// storing (store-%), rather than waiting at the top-up limit, and what
// that cost a job it stored (store-us/job): near 100 %, the jobs ran as
// fast as the producer could store them beside the workers, whose calls
// on the same server slow its stores, and the run measures that.
//
// Only a run of minReported jobs or more reports its time, rates and
// latencies: a shorter one (the smoke run of make test) shows that the
// benchmark works, not how fast.

// benchDomains is how many domains the pg side's jobs are spread over:
// each domain's jobs run in order, one at a time.
const benchDomains = 1000

// The Pool's settings: poolWorkers handlers, poolConns connections.
const (
	poolWorkers = 512
	poolConns   = 16
)

// river bench's continuous producer: every continuousEvery, it stores
// jobs until continuousBacklog wait.
const (
	continuousBacklog = 75_000
	continuousEvery   = 250 * time.Millisecond
)

// minReported is the fewest jobs a run reports figures for.
const minReported = 10_000

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

// handlers are the work each job does: none, and a millisecond's sleep.
var handlers = []struct {
	name string
	work time.Duration
}{{"none", 0}, {"1ms", time.Millisecond}}

// A run is one benchmark's jobs: when each was stored and started, by its
// number, and how many have finished.
type run struct {
	b        *testing.B
	stored   []atomic.Int64 // unix nanoseconds, once its store returned
	started  []atomic.Int64 // unix nanoseconds, as its handler began
	finished atomic.Int64
	done     chan struct{} // closed when b.N jobs have finished

	// What the producer did while the jobs ran: how long its stores took,
	// and how many jobs they stored. Written by produce, read by report
	// once produce has returned.
	storing      time.Duration
	storedDuring int
}

func newRun(b *testing.B) *run {
	return &run{b: b, stored: make([]atomic.Int64, b.N), started: make([]atomic.Int64, b.N), done: make(chan struct{})}
}

// start notes that job i's handler began.
func (r *run) start(i int) { r.started[i].CompareAndSwap(0, time.Now().UnixNano()) }

// finish notes that a job finished.
func (r *run) finish() {
	if r.finished.Add(1) == int64(r.b.N) {
		close(r.done)
	}
}

// storedNow notes that jobs i to j-1 were stored.
func (r *run) storedNow(i, j int) {
	now := time.Now().UnixNano()
	for k := i; k < j; k++ {
		r.stored[k].Store(now)
	}
}

// report reports the rate at which b.N jobs finished since start and, if
// latency, the time from each job's store to its start: the median and
// the 99th percentile.
func (r *run) report(start time.Time, latency bool) {
	b := r.b
	elapsed := time.Since(start)
	if b.N < minReported {
		b.ReportMetric(0, "ns/op") // a metric of 0 is not printed
		return
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	if !latency {
		return
	}
	lat := make([]time.Duration, b.N)
	for i := range lat {
		lat[i] = max(0, time.Duration(r.started[i].Load()-r.stored[i].Load()))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[b.N/2])/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(lat[b.N*99/100])/float64(time.Millisecond), "p99-ms")
	if r.storedDuring > 0 {
		b.ReportMetric(100*r.storing.Seconds()/elapsed.Seconds(), "store-%")
		b.ReportMetric(float64(r.storing.Microseconds())/float64(r.storedDuring), "store-us/job")
	}
}

// produce stores jobs from to to-1 with store, a batch of jobs i to j-1
// at a time: all at once, or, if continuous, as river bench's producer
// does: every continuousEvery it stores batches until continuousBacklog
// jobs wait. It returns store's first error, or nil once every job is
// stored or stop is closed. If continuous, it notes how long its stores
// took (see run.storing).
func (r *run) produce(from, to int, continuous bool, batch int, store func(i, j int) error, stop <-chan struct{}) error {
	for i := from; i < to; {
		if continuous && int64(i)-r.finished.Load() >= continuousBacklog {
			select {
			case <-time.After(continuousEvery):
			case <-stop:
				return nil
			}
			continue
		}
		j := min(i+batch, to)
		began := time.Now()
		if err := store(i, j); err != nil {
			return err
		}
		if continuous {
			r.storing += time.Since(began)
			r.storedDuring += j - i
		}
		r.storedNow(i, j)
		i = j
	}
	return nil
}

// storedFirst returns how many jobs a run stores before its timer starts:
// all of them, or, if continuous, as many as river bench's producer
// stores before it starts its clock, continuousBacklog.
func (r *run) storedFirst(continuous bool) int {
	if continuous {
		return min(r.b.N, continuousBacklog)
	}
	return r.b.N
}

// A job of the pg side: job i is offset i/benchDomains of domain
// i%benchDomains.
func jobDomain(i int) string         { return domainNames[i%benchDomains] }
func jobOffset(i int) int64          { return int64(i / benchDomains) }
func jobNumber(d int, off int64) int { return int(off)*benchDomains + d }

var domainNames, domainIndex = func() ([]string, map[string]int) {
	names, index := make([]string, benchDomains), make(map[string]int, benchDomains)
	for i := range names {
		names[i] = fmt.Sprintf("domain-%04d", i)
		index[names[i]] = i
	}
	return names, index
}()

// openManager opens a Manager on a schema of its own, and returns it with
// its pool; the schema is dropped when b ends.
func openManager(b *testing.B, conns int32) (*pg.Manager, *pgxpool.Pool) {
	pool := testPool(b, conns)
	m, err := pg.OpenSchema(context.Background(), pool, newSchema(b, pool))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m, pool
}

// storeMany returns the producer's store of jobs i to j-1 in m.
func storeMany(m *pg.Manager) func(i, j int) error {
	return func(i, j int) error {
		items := make([]pg.Item, 0, j-i)
		for k := i; k < j; k++ {
			items = append(items, pg.Item{Domain: jobDomain(k), Offset: jobOffset(k)})
		}
		_, err := m.EnqueueMany(context.Background(), items)
		return err
	}
}

// BenchmarkPoolBurnDown runs b.N jobs, stored before the timer starts,
// through a worker Pool of poolWorkers over the pg Manager; at the end it
// checks that each domain's jobs ran in order, once each.
func BenchmarkPoolBurnDown(b *testing.B) { benchPool(b, false) }

// BenchmarkPoolContinuous is BenchmarkPoolBurnDown with the jobs stored
// while the Pool runs, by river bench's producer; it reports the time
// from each job's store to its start.
func BenchmarkPoolContinuous(b *testing.B) { benchPool(b, true) }

func benchPool(b *testing.B, continuous bool) {
	for _, h := range handlers {
		b.Run("handler="+h.name, func(b *testing.B) { runPool(b, continuous, h.work) })
	}
}

// poolStoreBatch is how many jobs the Pool's producer stores at a time.
// Among 50, 100 and 200, 100 kept the continuous run fastest on a quiet
// machine (three alternating rounds of each, 200,000 jobs: 18,900 to 20,200
// jobs/s with no handler, against 16,400 to 17,100 with 50); 200, and 250
// since, were as fast, each item costing the server as much, but their jobs
// waited longer from store to start than River's (p99).
const poolStoreBatch = 100

func runPool(b *testing.B, continuous bool, work time.Duration) {
	m, _ := openManager(b, poolConns)
	r := newRun(b)
	var mu sync.Mutex
	order := make([][]int64, benchDomains) // each domain's offsets, in the order they ran
	p, err := worker.New(m, func(ctx context.Context, j worker.Job) error {
		d := domainIndex[j.Domain]
		r.start(jobNumber(d, j.Offset))
		if work > 0 {
			time.Sleep(work)
		}
		mu.Lock()
		order[d] = append(order[d], j.Offset)
		mu.Unlock()
		r.finish()
		return nil
	}, worker.WithWorkers(poolWorkers), worker.WithQueueLimit(0))
	if err != nil {
		b.Fatal(err)
	}
	store := storeMany(m)
	first := r.storedFirst(continuous)
	if err := r.produce(0, first, false, 5000, store, nil); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ran := make(chan error, 1)
	produced := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { ran <- p.Run(ctx) }()
	go func() { produced <- r.produce(first, b.N, true, poolStoreBatch, store, r.done) }()
	select {
	case <-r.done:
	case err := <-ran:
		b.Fatalf("the Pool stopped: %v", err)
	}
	// A job is finished once the Pool has ended it in the database.
	for p.Stats().Succeeded < uint64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	if err := <-produced; err != nil {
		b.Fatal(err)
	}
	r.report(start, continuous)
	if err := p.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	for d, offs := range order {
		want := int64(0)
		for _, off := range offs {
			if off != want {
				b.Fatalf("%s ran offset %d where %d was next: %v", domainNames[d], off, want, offs)
			}
			want++
		}
	}
}

// BenchmarkFloorBurnDown burns down b.N jobs as BenchmarkPoolBurnDown
// does, with a no-op handler, through a loop written by hand over the
// Manager's batch calls: floorWorkers goroutines each claim a batch of
// ready domains' heads, end them with ClaimNext, which leases the same
// domains' next offsets in the same call, and top the batch up with
// Claim, waiting with WaitClaim when nothing is ready; the batch doubles
// while it comes back full and halves when it comes back short. It is the
// floor of what the Manager can do on this server, which the Pool is
// measured against.
func BenchmarkFloorBurnDown(b *testing.B) {
	// A worker's first claim, and the most it claims at once: its share of
	// the domains (a worker that claims more leaves others idle).
	const floorWorkers = 16
	const claimBatch, maxClaimBatch = 10, benchDomains / floorWorkers
	m, _ := openManager(b, floorWorkers+1)
	ctx := context.Background()
	r := newRun(b)
	if err := r.produce(0, b.N, false, 5000, storeMany(m), nil); err != nil {
		b.Fatal(err)
	}
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
	for range floorWorkers {
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
				for range claims {
					r.finish()
				}
				if r.finished.Load() >= int64(b.N) {
					stop()
				}
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
	r.report(start, false)
}

// riverArgs is the River job of the River benchmarks.
type riverArgs struct {
	Num int `json:"num"`
}

func (riverArgs) Kind() string { return "benchmark" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	r    *run
	work time.Duration
}

func (w *riverWorker) Work(_ context.Context, j *river.Job[riverArgs]) error {
	w.r.start(j.Args.Num)
	if w.work > 0 {
		time.Sleep(w.work)
	}
	return nil
}

// BenchmarkRiverBurnDown burns down b.N River jobs, inserted before the
// timer starts, with River's own benchmark settings (2,000 workers, a
// 2 ms fetch cooldown, a 20 ms poll): River's fetches and completions are
// batched, and its jobs have no order and no key.
func BenchmarkRiverBurnDown(b *testing.B) { benchRiver(b, false) }

// BenchmarkRiverContinuous is BenchmarkRiverBurnDown with the jobs
// inserted while the client works, by river bench's producer; it reports
// the time from each job's insert to its start.
func BenchmarkRiverContinuous(b *testing.B) { benchRiver(b, true) }

func benchRiver(b *testing.B, continuous bool) {
	for _, h := range handlers {
		b.Run("handler="+h.name, func(b *testing.B) { runRiver(b, continuous, h.work) })
	}
}

// riverInsertBatch is how many jobs river bench inserts at a time.
const riverInsertBatch = 5000

func runRiver(b *testing.B, continuous bool, work time.Duration) {
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
	r := newRun(b)
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{r: r, work: work})
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
	insert := func(i, j int) error {
		batch := make([]river.InsertManyParams, 0, j-i)
		for k := i; k < j; k++ {
			batch = append(batch, river.InsertManyParams{Args: riverArgs{Num: k}})
		}
		_, err := client.InsertMany(ctx, batch)
		return err
	}
	first := r.storedFirst(continuous)
	if err := r.produce(0, first, false, riverInsertBatch, insert, nil); err != nil {
		b.Fatal(err)
	}
	// A job is finished once River has completed it: its completer ends
	// jobs in batches after their handlers return.
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
	produced := make(chan error, 1)
	go func() { produced <- r.produce(first, b.N, true, riverInsertBatch, insert, r.done) }()
	for range b.N {
		ev := <-events
		if ev.Kind != river.EventKindJobCompleted {
			b.Fatalf("a job ended %s", ev.Kind)
		}
		r.finish()
	}
	b.StopTimer()
	if err := <-produced; err != nil {
		b.Fatal(err)
	}
	r.report(start, continuous)
	if err := client.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}
