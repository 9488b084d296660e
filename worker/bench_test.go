package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// The Pool's benchmarks compare it with what it replaces, in the same
// run: a hand-written loop over the same Manager doing the same work, and,
// for throughput, a plain worker pool that keeps no order at all. Job i is
// offset i/domains of domain i%domains, submitted in order by one producer
// while the workers run; each sub-benchmark runs b.N jobs, and the timer
// stops once every job was handled.
//
//	go test -run='^$' -bench=BenchmarkPool -count=5 ./worker

// BenchmarkPoolOverhead runs a trivial handler through the Pool, and
// through the contract's pull loop over the Manager (Enqueue; WaitClaim of
// up to 10 leases, the handler on each, SucceedMany of the batch) with as
// many goroutines: impl=pool ÷ impl=loop is the Pool's cost per job.
func BenchmarkPoolOverhead(b *testing.B) {
	const domains, workers = 1000, 16
	b.Run("impl=pool", func(b *testing.B) {
		runPool(b, domains, func() {}, worker.WithWorkers(workers))
	})
	b.Run("impl=loop", func(b *testing.B) {
		m := newBenchManager(b)
		var handled atomic.Int64
		done := make(chan struct{})
		handle := func() {
			if handled.Add(1) == int64(b.N) {
				close(done)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for range workers {
			wg.Go(func() {
				for {
					cs, err := m.WaitClaim(ctx, 10, 0)
					if err != nil {
						return
					}
					for range cs {
						handle()
					}
					if _, err := m.SucceedMany(cs); err != nil {
						panic(err)
					}
				}
			})
		}
		for i := range b.N {
			if _, err := m.Enqueue(benchDomain(i, domains), int64(i/domains), nil); err != nil {
				panic(err)
			}
		}
		<-done
		b.StopTimer()
		cancel()
		wg.Wait()
	})
}

// BenchmarkPoolThroughput runs a handler that takes a millisecond, as a
// call to a database or a service might, over 1,000 domains, through the
// Pool, and through a plain pool of as many goroutines taking the same
// jobs from a channel, in no order: impl=pool ÷ impl=unordered, in jobs a
// second, is the share of the plain pool's throughput the Pool keeps
// while it keeps each domain's order.
func BenchmarkPoolThroughput(b *testing.B) {
	const domains, workers = 1000, 64
	work := func() { time.Sleep(time.Millisecond) }
	b.Run("impl=pool", func(b *testing.B) {
		runPool(b, domains, work, worker.WithWorkers(workers))
	})
	b.Run("impl=unordered", func(b *testing.B) {
		jobs := make(chan worker.Job, worker.DefaultQueueLimit)
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for range jobs {
					work()
				}
			})
		}
		for i := range b.N {
			jobs <- worker.Job{Domain: benchDomain(i, domains), Offset: int64(i / domains)}
		}
		close(jobs)
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
	})
}

// runPool runs b.N jobs through a Pool on a new Manager, with a handler
// that calls work.
func runPool(b *testing.B, domains int, work func(), opts ...worker.Option) {
	m := newBenchManager(b)
	var handled atomic.Int64
	done := make(chan struct{})
	p, err := worker.New(m.Backend(), func(context.Context, worker.Job) error {
		work()
		if handled.Add(1) == int64(b.N) {
			close(done)
		}
		return nil
	}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ran := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() { ran <- p.Run(ctx) }()
	for i := range b.N {
		if _, err := p.Submit(ctx, benchDomain(i, domains), int64(i/domains), nil); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
	if err := p.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}

func newBenchManager(b *testing.B) *worklease.Manager {
	m, err := worklease.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// benchDomains holds the domains' names, made once, so that a job's
// domain costs no allocation.
var benchDomains = func() []string {
	out := make([]string, 1000)
	for i := range out {
		out[i] = fmt.Sprintf("tenant-%d", i)
	}
	return out
}()

func benchDomain(i, domains int) string { return benchDomains[i%domains] }
