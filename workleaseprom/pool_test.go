package workleaseprom_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
	"github.com/worklease/worklease/workleaseprom"
)

// With a real backend and pool, every attempt is timed: each ends in the
// backend's event under the token the pool's EventStarted named.
func TestWithPool(t *testing.T) {
	t.Parallel()
	c := workleaseprom.New(workleaseprom.Options{})
	m, err := worklease.New(worklease.WithObserver(c), worklease.WithMaxRetries(1))
	require.NoError(t, err)
	defer m.Close()

	const domains, offsets = 10, 20
	var handled sync.WaitGroup
	handled.Add(domains * offsets * 2) // every offset fails once, then succeeds or is dead-lettered
	pool, err := worker.New(m.Backend(), func(ctx context.Context, job worker.Job) error {
		defer handled.Done()
		if job.Attempt == 1 || job.Offset%2 == 1 {
			return errors.New("failed")
		}
		return nil
	}, worker.WithObserver(c), worker.WithWorkers(4), worker.WithBackoff(worklease.Backoff{Base: time.Microsecond, Max: time.Microsecond}))
	require.NoError(t, err)
	ctx := t.Context()
	for d := range domains {
		for o := range int64(offsets) {
			_, err := pool.Submit(ctx, fmt.Sprint("d", d), o, nil)
			require.NoError(t, err)
		}
	}
	done := make(chan error)
	go func() { done <- pool.Run(ctx) }()
	handled.Wait()
	require.NoError(t, pool.Stop(ctx))
	require.NoError(t, <-done)

	const n = domains * offsets
	assert.Equal(t, float64(n/2), value(t, c, "worklease_events_total", "Processed"))
	assert.Equal(t, float64(n/2), value(t, c, "worklease_events_total", "DeadLettered"))
	assert.Equal(t, float64(n), value(t, c, "worklease_events_total", "Retrying"))
	assert.Equal(t, float64(2*n), value(t, c, "worklease_events_total", "Started"))
	assert.Equal(t, 0.0, inFlight(t, c))
	for outcome, want := range map[string]uint64{"Processed": n / 2, "DeadLettered": n / 2, "Retrying": n} {
		assert.Equal(t, want, histogramCount(t, c, outcome), outcome)
	}
}
