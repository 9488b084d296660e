// Command worker is the orchestrator example's work done by a worker Pool:
// the application writes the handler, and the Pool does the routing, the
// retries with backoff, the dead letters, the hand-off from one offset of
// a domain to the next, and the shutdown.
//
// A producer submits events (domain, offset) for many domains, interleaved,
// each with a payload, and redelivers some, as an at-least-once stream
// does; Submit holds it back when too many are unfinished. The handler
// applies each event to a store that refuses writes under an older fence,
// and fails at random. At the end the program checks that every domain's
// events were applied once each, in order, or dead-lettered, and prints the
// Pool's counts. The exit status is 0 if that holds, 1 otherwise.
//
// Run it from the module root:
//
//	go run ./examples/worker
//	go run ./examples/worker -domains 10 -events 5000 -fail-rate 0.5
//
// The orchestrator example (go run ./examples/orchestrator) does the same
// with the lease contract by hand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sync"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the program's flags.
type config struct {
	domains, events, workers int
	failRate, dupRate        float64
	maxRetries               int
}

func realMain(args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.domains, "domains", 1000, "domains")
	fs.IntVar(&cfg.events, "events", 50_000, "events, spread over the domains")
	fs.IntVar(&cfg.workers, "workers", 32, "handlers running at once")
	fs.Float64Var(&cfg.failRate, "fail-rate", 0.1, "the share of attempts that fail")
	fs.Float64Var(&cfg.dupRate, "dup-rate", 0.02, "the share of events delivered twice")
	fs.IntVar(&cfg.maxRetries, "max-retries", 3, "retries before an event is dead-lettered")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, stdout); err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 1
	}
	return 0
}

// A store is what the handler writes to: each domain's applied events, in
// order, under growing fences.
type store struct {
	mu      sync.Mutex
	fences  map[string]uint64
	applied map[string][]int64
}

// apply writes event offset of domain under fence, unless a newer holder
// of the domain's lease wrote already.
func (s *store) apply(domain string, offset int64, fence uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.fences[domain] {
		return fmt.Errorf("%s/%d: stale fence %d", domain, offset, fence)
	}
	s.fences[domain] = fence
	s.applied[domain] = append(s.applied[domain], offset)
	return nil
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	m, err := worklease.New(worklease.WithMaxRetries(cfg.maxRetries))
	if err != nil {
		return err
	}
	defer m.Close()
	s := &store{fences: map[string]uint64{}, applied: map[string][]int64{}}
	p, err := worker.New(m.Backend(), func(ctx context.Context, job worker.Job) error {
		if rand.Float64() < cfg.failRate {
			return errors.New("the database timed out") // retried after the Pool's backoff
		}
		if want := fmt.Sprintf("%s/%d", job.Domain, job.Offset); string(job.Payload) != want {
			return fmt.Errorf("payload %q, want %q", job.Payload, want)
		}
		return s.apply(job.Domain, job.Offset, job.Token.Fence())
	}, worker.WithWorkers(cfg.workers), worker.WithBackoff(worklease.Backoff{Base: time.Millisecond, Max: 50 * time.Millisecond}))
	if err != nil {
		return err
	}
	start := time.Now()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()

	for i := range cfg.events {
		domain, offset := fmt.Sprintf("tenant-%d", i%cfg.domains), int64(i/cfg.domains)
		payload := []byte(fmt.Sprintf("%s/%d", domain, offset))
		for range 1 + boolInt(rand.Float64() < cfg.dupRate) { // a redelivery is stored once
			if _, err := p.Submit(ctx, domain, offset, payload); err != nil {
				return err
			}
		}
	}
	// Every event submitted is finished once none is left in the Pool's count.
	for p.Stats().Queued > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := p.Stop(ctx); err != nil {
		return err
	}
	if err := <-ran; err != nil {
		return err
	}
	st := p.Stats()
	fmt.Fprintf(out, "%d events over %d domains in %v: %d succeeded, %d attempts retried, %d dead-lettered\n",
		cfg.events, cfg.domains, time.Since(start).Round(time.Millisecond), st.Succeeded, st.Retried, st.DeadLettered)
	if err := verify(m, s, cfg); err != nil {
		return err
	}
	fmt.Fprintln(out, "order verified: every domain's events applied once, in order, or dead-lettered")
	return nil
}

// verify checks that each domain's events were applied in order, once
// each, except the dead-lettered ones.
func verify(m *worklease.Manager, s *store, cfg config) error {
	dead, err := m.DeadLetters("")
	if err != nil {
		return err
	}
	failed := map[string][]int64{}
	for _, d := range dead {
		failed[d.Domain] = append(failed[d.Domain], d.Offset)
	}
	for d := range cfg.domains {
		domain := fmt.Sprintf("tenant-%d", d)
		var want []int64
		for off := int64(0); off*int64(cfg.domains)+int64(d) < int64(cfg.events); off++ {
			if !slices.Contains(failed[domain], off) {
				want = append(want, off)
			}
		}
		if got := s.applied[domain]; !slices.Equal(got, want) {
			return fmt.Errorf("%s: applied %v, want %v", domain, got, want)
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
