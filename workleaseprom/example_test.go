package workleaseprom_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
	"github.com/worklease/worklease/workleaseprom"
)

// The Collector observes the backend, for the transitions, and the pool,
// for its handlers' starts; the queued gauge reads the pool's Stats.
func Example() {
	var pool *worker.Pool
	c := workleaseprom.New(workleaseprom.Options{
		Queued: func() float64 { return float64(pool.Stats().Queued) },
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c) // or prometheus.MustRegister(c), for the default registry

	m, err := worklease.New(worklease.WithObserver(c))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	var handled sync.WaitGroup // for the example's sake: a service runs on
	handled.Add(3)
	pool, err = worker.New(m.Backend(), func(ctx context.Context, job worker.Job) error {
		defer handled.Done()
		return nil // the work
	}, worker.WithObserver(c))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for offset := range int64(3) {
		if _, err := pool.Submit(ctx, "tenant-7", offset, nil); err != nil {
			panic(err)
		}
	}
	done := make(chan error)
	go func() { done <- pool.Run(ctx) }()
	handled.Wait()
	if err := pool.Stop(ctx); err != nil { // lets the attempts end: Processed
		panic(err)
	}
	if err := <-done; err != nil {
		panic(err)
	}

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch {
			case f.GetName() == "worklease_events_total" && s.GetLabel()[0].GetValue() == "Processed":
				fmt.Println("processed:", s.GetCounter().GetValue())
			case f.GetName() == "worklease_handler_duration_seconds":
				fmt.Println("handlers timed:", s.GetHistogram().GetSampleCount())
			case f.GetName() == "worklease_in_flight":
				fmt.Println("in flight:", s.GetGauge().GetValue())
			case f.GetName() == "worklease_queued":
				fmt.Println("queued:", s.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// processed: 3
	// handlers timed: 3
	// in flight: 0
	// queued: 0
}
