package pg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
	"github.com/worklease/worklease/worker"
)

// TestWorkerPools runs two worker Pools, as two processes would, each on a
// Manager of its own over the same schema, one of them submitting the
// offsets: each domain's offsets succeed once, in order, under growing
// fences and one attempt at a time, whatever the failures and whichever
// Pool runs them, and each attempt carries its payload.
func TestWorkerPools(t *testing.T) {
	t.Parallel()
	const domains, offsets = 8, 20
	pool := testPool(t)
	opts := []worklease.Option{worklease.WithLeaseTTL(10 * time.Second), worklease.WithMaxRetries(100)}
	a, schema := newManager(t, pool, opts...)
	b, err := pg.OpenSchema(context.Background(), pool, schema, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer a.Close()

	var mu sync.Mutex
	running := map[string]bool{}
	fences := map[string]uint64{}
	applied := map[string][]int64{}
	var errs []error
	handler := func(ctx context.Context, j worker.Job) error {
		mu.Lock()
		if running[j.Domain] {
			errs = append(errs, fmt.Errorf("%s/%d began while another attempt of %s ran", j.Domain, j.Offset, j.Domain))
		}
		if f := j.Token.Fence(); f <= fences[j.Domain] {
			errs = append(errs, fmt.Errorf("%s/%d: fence %d after %d", j.Domain, j.Offset, f, fences[j.Domain]))
		}
		if want := fmt.Sprintf("%s/%d", j.Domain, j.Offset); string(j.Payload) != want {
			errs = append(errs, fmt.Errorf("%s/%d: payload %q, want %q", j.Domain, j.Offset, j.Payload, want))
		}
		running[j.Domain], fences[j.Domain] = true, j.Token.Fence()
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		ok := rand.IntN(5) > 0
		mu.Lock()
		running[j.Domain] = false
		if ok {
			applied[j.Domain] = append(applied[j.Domain], j.Offset)
		}
		mu.Unlock()
		if !ok {
			return errors.New("flaky")
		}
		return nil
	}
	backoff := worklease.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}
	var pools []*worker.Pool
	ran := make(chan error, 2)
	for _, m := range []*pg.Manager{a, b} {
		p, err := worker.New(m, handler, worker.WithWorkers(4), worker.WithBackoff(backoff), worker.WithQueueLimit(0))
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, p)
		go func() { ran <- p.Run(context.Background()) }()
	}
	ctx := context.Background()
	for off := range int64(offsets) {
		for d := range domains {
			dom := fmt.Sprintf("d%d", d)
			if _, err := pools[0].Submit(ctx, dom, off, []byte(fmt.Sprintf("%s/%d", dom, off))); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for done := 0; done < domains; {
		if time.Now().After(deadline) {
			t.Fatal("the offsets were not all processed within two minutes")
		}
		time.Sleep(20 * time.Millisecond)
		done = 0
		for d := range domains {
			info, err := a.Inspect(ctx, fmt.Sprintf("d%d", d))
			if err != nil {
				t.Fatal(err)
			}
			if info.Processed == offsets {
				done++
			}
		}
	}
	for _, p := range pools {
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	want := make([]int64, offsets)
	for i := range want {
		want[i] = int64(i)
	}
	for d := range domains {
		dom := fmt.Sprintf("d%d", d)
		if !slices.Equal(applied[dom], want) {
			t.Errorf("%s: applied %v, want %v", dom, applied[dom], want)
		}
	}
	for i, p := range pools {
		st := p.Stats()
		t.Logf("pool %d: %+v", i, st)
		if st.Errors != 0 || st.LeaseLost != 0 {
			t.Errorf("pool %d: %d errors, %d leases lost", i, st.Errors, st.LeaseLost)
		}
	}
	if err := checkRows(ctx, pool, schema); err != nil {
		t.Error(err)
	}
}
