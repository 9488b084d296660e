package pg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// benchWorkers is how many goroutines the benchmarks run: workers of a
// service, each with a connection of its own.
const benchWorkers = 16

// benchPool returns a pool with a connection for each worker.
func benchPool(b *testing.B) *pgxpool.Pool {
	pool := testPool(b)
	cfg := pool.Config()
	cfg.MaxConns = benchWorkers
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	return p
}

// runWorkers runs benchWorkers goroutines until b.N cycles are done in
// all, worker w calling cycle(w, i, last) for its i-th cycle, last saying
// whether it is the worker's last (each worker takes its next cycle before
// it runs one), and reports
// cycles/s, a cycle's median and 99th-percentile latency, and the bytes
// of write-ahead log the server wrote per cycle (pool is to read its
// position). The first error stops the benchmark.
func runWorkers(b *testing.B, pool *pgxpool.Pool, cycle func(w, i int, last bool) error) {
	walStart := walPosition(b, pool)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	latencies := make([][]time.Duration, benchWorkers) // each worker's
	b.ResetTimer()
	start := time.Now()
	for w := range benchWorkers {
		wg.Go(func() {
			more := next.Add(1) <= int64(b.N)
			for i := 0; more && failed.Load() == nil; i++ {
				more = next.Add(1) <= int64(b.N)
				began := time.Now()
				if err := cycle(w, i, !more); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
				latencies[w] = append(latencies[w], time.Since(began))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
	all := slices.Sorted(slices.Values(slices.Concat(latencies...)))
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(walPosition(b, pool)-walStart)/float64(b.N), "WAL-B/cycle")
}

// store enqueues the items item(0) to item(n-1), a thousand a round trip.
func store(b *testing.B, m *pg.Manager, n int, item func(i int) pg.Item) {
	var items []pg.Item
	for i := range n {
		items = append(items, item(i))
		if len(items) == 1000 || i == n-1 {
			if _, err := m.EnqueueMany(context.Background(), items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
	}
}

// walPosition returns the server's write-ahead log position, in bytes.
func walPosition(b *testing.B, pool *pgxpool.Pool) int64 {
	var lsn int64
	if err := pool.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn() - '0/0'").Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// BenchmarkPostgresCycle is TryAcquire and Succeed on PostgreSQL: benchWorkers
// workers, each over a share of the domains of its own (no two workers
// contend for a domain), visited in a fixed pseudo-random order, each
// visit the domain's next offset. Every call commits durably.
func BenchmarkPostgresCycle(b *testing.B) {
	for _, domains := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("domains=%d", domains), func(b *testing.B) {
			pool := benchPool(b)
			m, _ := newManager(b, pool)
			ctx := context.Background()
			visits := shares(domains)
			// Every domain exists, with offset 0 finished, before the timer
			// starts: a service's domains are mostly known ones.
			for _, visit := range visits {
				for _, domain := range visit {
					res, err := m.TryAcquire(ctx, domain, 0)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.Succeed(ctx, domain, res.Token); err != nil {
						b.Fatal(err)
					}
				}
			}
			runWorkers(b, pool, func(w, i int, _ bool) error {
				visit := visits[w]
				domain, offset := visit[i%len(visit)], int64(1+i/len(visit))
				res, err := m.TryAcquire(ctx, domain, offset)
				if err != nil {
					return err
				}
				if res.Status != worklease.Acquired {
					return fmt.Errorf("TryAcquire(%s, %d): %v", domain, offset, res.Status)
				}
				_, err = m.Succeed(ctx, domain, res.Token)
				return err
			})
		})
	}
}

// shares splits domains names among the workers, each share in a fixed
// pseudo-random order.
func shares(domains int) [][]string {
	out := make([][]string, benchWorkers)
	for w := range out {
		n := domains / benchWorkers
		rng := rand.New(rand.NewPCG(uint64(w), uint64(domains)))
		for _, j := range rng.Perm(n) {
			out[w] = append(out[w], fmt.Sprintf("domain-%d-%d", w, j))
		}
	}
	return out
}

// BenchmarkPostgresSkipLocked is the floor BenchmarkPostgresCycle is measured against: a
// plain job table on the same server, whose workers claim the oldest ready
// job with FOR UPDATE SKIP LOCKED and mark it done, one autocommitted
// statement each. Its jobs, one per cycle, are in the table before the
// timer starts.
func BenchmarkPostgresSkipLocked(b *testing.B) {
	pool := benchPool(b)
	schema := newSchemaName()
	b.Cleanup(func() { dropSchema(b, pool, schema) })
	ctx := context.Background()
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+s+"; CREATE TABLE "+s+`.jobs (
		id bigserial PRIMARY KEY, domain text NOT NULL, off bigint NOT NULL, state text NOT NULL DEFAULT 'ready');
		CREATE INDEX ON `+s+".jobs (id) WHERE state = 'ready'"); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+s+".jobs (domain, off) SELECT 'domain-' || (i % 1000), i FROM generate_series(1, $1) i", b.N); err != nil {
		b.Fatal(err)
	}
	claim := "UPDATE " + s + ".jobs SET state = 'running' WHERE id = (SELECT id FROM " + s +
		".jobs WHERE state = 'ready' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id"
	complete := "UPDATE " + s + ".jobs SET state = 'done' WHERE id = $1"
	runWorkers(b, pool, func(int, int, bool) error {
		var id int64
		if err := pool.QueryRow(ctx, claim).Scan(&id); err != nil {
			return err
		}
		_, err := pool.Exec(ctx, complete, id)
		return err
	})
}

// BenchmarkPostgresStorage measures what a domain's processed offsets cost
// in its row: b.N offsets succeed in order, one in every holeEvery skipped
// (never offered, so never processed), and the bytes the row stores for
// them are reported per offset.
func BenchmarkPostgresStorage(b *testing.B) {
	for _, holeEvery := range []int{0, 100} {
		b.Run(fmt.Sprintf("hole-every=%d", holeEvery), func(b *testing.B) {
			pool := testPool(b)
			m, schema := newManager(b, pool)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				offset := int64(i)
				if holeEvery > 0 && i%holeEvery == holeEvery-1 {
					continue
				}
				res, err := m.TryAcquire(ctx, "d", offset)
				if err != nil || res.Status != worklease.Acquired {
					b.Fatalf("TryAcquire(d, %d): %v, %v", offset, res.Status, err)
				}
				if _, err := m.Succeed(ctx, "d", res.Token); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var size int64
			if err := pool.QueryRow(ctx, "SELECT pg_column_size(processed) FROM "+pgx.Identifier{schema}.Sanitize()+".domains").Scan(&size); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(size), "B")
			b.ReportMetric(float64(size)/float64(b.N), "B/offset")
		})
	}
}

// BenchmarkPostgresPullCycle is the pull queue unbatched: benchWorkers
// workers each claim one ready domain's head and end its lease, one
// statement each, over 100, 1,000 and 10,000 domains whose offsets, b.N in
// all, are stored before the timer starts. Each domain's offsets finish in order, one at a
// time.
func BenchmarkPostgresPullCycle(b *testing.B) {
	for _, domains := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("domains=%d", domains), func(b *testing.B) { benchmarkPullCycle(b, domains) })
	}
}

func benchmarkPullCycle(b *testing.B, domains int) {
	pool := benchPool(b)
	m, _ := newManager(b, pool)
	ctx := context.Background()
	store(b, m, b.N, func(i int) pg.Item {
		return pg.Item{Domain: fmt.Sprintf("domain-%05d", i%domains), Offset: int64(i / domains)}
	})
	runWorkers(b, pool, func(int, int, bool) error {
		for {
			claims, err := m.Claim(ctx, 1)
			if err != nil {
				return err
			}
			if len(claims) == 0 { // every ready domain is leased to another worker
				time.Sleep(100 * time.Microsecond)
				continue
			}
			errs, err := m.SucceedMany(ctx, claims)
			if err == nil {
				err = errs[0]
			}
			return err
		}
	})
}

// BenchmarkPostgresPullNext is BenchmarkPostgresPullCycle/domains=1000
// with complete-and-continue: each worker works one offset at a time,
// ending it with ClaimNext, which leases the same domain's next offset in
// the same statement (MaxStreak times in a row), and claims anew when that
// leases nothing. A cycle is one offset claimed and completed.
func BenchmarkPostgresPullNext(b *testing.B) {
	const domains = 1000
	pool := benchPool(b)
	m, _ := newManager(b, pool)
	ctx := context.Background()
	store(b, m, b.N, func(i int) pg.Item {
		return pg.Item{Domain: fmt.Sprintf("domain-%05d", i%domains), Offset: int64(i / domains)}
	})
	next := make([][]worklease.Claim, benchWorkers) // each worker's next lease
	runWorkers(b, pool, func(w, _ int, last bool) error {
		claims := next[w]
		for len(claims) == 0 {
			var err error
			if claims, err = m.Claim(ctx, 1); err != nil {
				return err
			}
			if len(claims) == 0 { // every ready domain is leased to another worker
				time.Sleep(100 * time.Microsecond)
			}
		}
		// A worker's last cycle ends its lease without taking the next,
		// which it would hold forever.
		var errs []error
		var err error
		if last {
			next[w] = nil
			errs, err = m.SucceedMany(ctx, claims)
		} else {
			next[w], errs, err = m.ClaimNext(ctx, claims)
		}
		if err == nil {
			err = errs[0]
		}
		return err
	})
}

// BenchmarkPostgresEnqueue is the producer's side: benchWorkers workers
// store offsets over 1,000 domains, each with a payload of 100 bytes, one
// Enqueue a cycle, an EnqueueMany of 100 items (a cycle is the batch), or
// one Append a cycle, whose offset the database assigns, without a key
// and with one (append-key: each Append keeps an idempotency key). Workers
// share domains, as producers do. items/s counts the offsets stored.
func BenchmarkPostgresEnqueue(b *testing.B) {
	const domains = 1000
	payload := make([]byte, 100)
	item := func(w, i, k int) pg.Item {
		n := (i*benchWorkers+w)*100 + k // unique among every worker's items
		return pg.Item{Domain: fmt.Sprintf("domain-%05d", n%domains), Offset: int64(n / domains), Payload: payload}
	}
	for _, mode := range []string{"batch=1", "batch=100", "append", "append-key"} {
		b.Run(mode, func(b *testing.B) {
			pool := benchPool(b)
			m, _ := newManager(b, pool)
			ctx := context.Background()
			batch := 1
			if mode == "batch=100" {
				batch = 100
			}
			start := time.Now()
			runWorkers(b, pool, func(w, i int, _ bool) error {
				switch mode {
				case "append", "append-key":
					it := item(w, i, 0)
					var opts worklease.AppendOptions
					if mode == "append-key" {
						opts.Key = fmt.Sprintf("event-%d-%d", w, i)
					}
					res, err := m.Append(ctx, it.Domain, it.Payload, opts)
					if err == nil && res.Status != worklease.Enqueued {
						err = fmt.Errorf("Append(%s): %v", it.Domain, res)
					}
					return err
				case "batch=1":
					it := item(w, i, 0)
					st, err := m.Enqueue(ctx, it.Domain, it.Offset, it.Payload)
					if err == nil && st != worklease.Enqueued {
						err = fmt.Errorf("Enqueue(%s, %d): %v", it.Domain, it.Offset, st)
					}
					return err
				}
				items := make([]pg.Item, batch)
				for k := range items {
					items[k] = item(w, i, k)
				}
				_, err := m.EnqueueMany(ctx, items)
				return err
			})
			b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "items/s")
		})
	}
}

// BenchmarkPostgresHotDomain is one domain's b.N offsets, stored before
// the timer starts, worked through by workers that wait for work with
// WaitClaim and end each lease with SucceedMany: with one worker, and with
// fifteen more that mostly wait, as the idle workers of a quiet queue do
// (one lease at a time: the domain keeps its order). What the fifteen
// cost is their wake-ups and claims that find nothing.
func BenchmarkPostgresHotDomain(b *testing.B) {
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			pool := benchPool(b)
			m, _ := newManager(b, pool)
			ctx := context.Background()
			defer m.Close()
			store(b, m, b.N, func(i int) pg.Item { return pg.Item{Domain: "hot", Offset: int64(i)} })
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var done atomic.Int64
			var failed atomic.Pointer[error]
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range workers {
				wg.Go(func() {
					for done.Load() < int64(b.N) {
						claims, err := m.WaitClaim(ctx, 1, 0)
						if ctx.Err() != nil {
							return
						}
						if err == nil {
							var errs []error
							errs, err = m.SucceedMany(ctx, claims)
							if err == nil {
								err = errs[0]
							}
						}
						if err != nil {
							failed.CompareAndSwap(nil, &err)
							cancel()
							return
						}
						if done.Add(1) == int64(b.N) {
							cancel() // wakes the waiting workers
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
		})
	}
}
