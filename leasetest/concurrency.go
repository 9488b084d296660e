package leasetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/worklease/worklease"
)

// testConcurrency is the Concurrency area: goroutines offer offsets of
// shared domains while workers drive them with SucceedNext, as an
// orchestrator does; every offset is processed once, in the order offered.
func testConcurrency(t *testing.T, s *Suite) {
	const (
		domains = 8
		offsets = 50
	)
	e := s.start(t)
	var (
		mu    sync.Mutex // guards order
		order = map[string][]int64{}
	)
	record := func(d string, off int64) {
		mu.Lock()
		order[d] = append(order[d], off)
		mu.Unlock()
	}
	work := func(d string, off int64, tok worklease.Token) error {
		for {
			record(d, off)
			res, err := e.b.SucceedNext(e.ctx, d, tok)
			if err != nil {
				return fmt.Errorf("SucceedNext(%q, %d): %w", d, off, err)
			}
			if res.Status != worklease.NextAcquired {
				return nil
			}
			off, tok = res.Lease.Offset, res.Lease.Token
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, domains*offsets)
	for i := range domains {
		d := fmt.Sprintf("d%d", i)
		wg.Go(func() { // one goroutine offers each domain's offsets, in order
			for off := range int64(offsets) {
				res, err := e.b.TryAcquire(e.ctx, d, off)
				if err != nil {
					errs <- fmt.Errorf("TryAcquire(%q, %d): %w", d, off, err)
					return
				}
				if res.Status == worklease.Acquired {
					wg.Go(func() {
						if err := work(d, off, res.Token); err != nil {
							errs <- err
						}
					})
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	mustEqual(t, 0, len(e.leases()), "leases left")
	for i := range domains {
		d := fmt.Sprintf("d%d", i)
		want := make([]int64, offsets)
		for off := range want {
			want[off] = int64(off)
		}
		mustEqual(t, want, order[d], "%q: offsets processed", d)
		mustEqual(t, worklease.DomainInfo{Processed: offsets}, e.inspect(d), "%q", d)
	}
	e.check()
}
