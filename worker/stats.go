package worker

// Stats are a Pool's counts: what it holds now, and what its workers did
// since New. Stats reads each count on its own, so counts that change
// together may be read a moment apart.
type Stats struct {
	Workers  int // WithWorkers's n
	InFlight int // handlers running now
	// Queued is the offsets submitted through the Pool that it has not
	// finished: queued in the backend, waiting out a retry's delay, or in
	// flight. It is the count WithQueueLimit bounds, and this Pool's view
	// of it (see WithQueueLimit): a Pool that only works, while other
	// processes produce, counts none. The depth of the whole backend,
	// whoever stored its offsets, is the backend's Totals().Queued, which
	// any process can read.
	Queued int

	Started      uint64 // handlers started
	Succeeded    uint64 // attempts that ended with the offset processed
	Retried      uint64 // attempts that failed and left the offset to be retried (Stop's cancelled ones among them)
	DeadLettered uint64 // attempts that failed and made the offset a dead letter
	Panicked     uint64 // attempts whose handler panicked (also counted as Retried or DeadLettered)
	LeaseLost    uint64 // attempts whose lease was found gone (see EventLeaseLost)
	Errors       uint64 // backend calls that failed (see WithErrorFunc)
}

// Stats returns the Pool's counts. It is cheap enough to call often: it
// reads a few counts of each worker.
func (p *Pool) Stats() Stats {
	s := Stats{
		Workers: p.cfg.workers, Queued: int(p.q.n.Load()),
		LeaseLost: p.lost.Load(), Errors: p.errors.Load(),
	}
	p.mu.Lock()
	workers := p.workers
	p.mu.Unlock()
	for _, w := range workers {
		if w.inFlight.Load() {
			s.InFlight++
		}
		s.Started += w.started.Load()
		s.Succeeded += w.succeeded.Load()
		s.Retried += w.retried.Load()
		s.DeadLettered += w.deadLettered.Load()
		s.Panicked += w.panicked.Load()
	}
	return s
}
