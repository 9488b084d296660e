package worker_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease/worker"
)

// TestJobsDoNotAllocate checks that a Pool over the Manager runs a job
// without allocating, once its buffers have grown: a worker ends its job,
// and takes the domain's next, in buffers it keeps. What is left is the
// claims', one call for many jobs. It is not parallel: it counts every
// goroutine's allocations.
func TestJobsDoNotAllocate(t *testing.T) {
	const domains, jobs = 8, 8_000
	m := newManager(t)
	var handled atomic.Int64
	done := make(chan struct{})
	p, err := worker.New(m.Backend(), func(context.Context, worker.Job) error {
		if handled.Add(1) == jobs {
			close(done)
		}
		return nil
	}, worker.WithWorkers(4))
	require.NoError(t, err)
	ctx := context.Background()
	for i := range jobs {
		_, err := p.Submit(ctx, string(rune('a'+i%domains)), int64(i/domains), nil)
		require.NoError(t, err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := run(t, p)
	<-done
	runtime.ReadMemStats(&after)
	require.NoError(t, r.stop(t))
	perJob := float64(after.Mallocs-before.Mallocs) / jobs
	t.Logf("%.3f allocations a job", perJob)
	require.Less(t, perJob, 0.5, "allocations a job")
}
