// Package worker runs a handler on the work of a [worklease.Backend]: the
// in-memory Manager or a backend that many processes share, such as the
// PostgreSQL one. A [Pool] does what an orchestrator built on the lease
// contract does by hand, so that an application writes only the work:
//
//	m, _ := worklease.New(worklease.WithMaxRetries(5))
//	p, _ := worker.New(m.Backend(), func(ctx context.Context, job worker.Job) error {
//		return apply(ctx, job.Domain, job.Payload, job.Token.Fence())
//	})
//	go p.Run(ctx)
//	p.Submit(ctx, "tenant-7", 42, payload) // from the application's stream
//	...
//	p.Stop(ctx) // claims no more, lets the handlers that run finish
//
// # What a Pool does
//
// Its workers, WithWorkers of them, run the handler on ready offsets, and
// the Pool calls the backend for many of them at once, so that a database
// backend makes one round trip for a batch of jobs where it would make one
// a job:
//
//   - Idle workers are given their offsets by one claim for all of them
//     (WaitClaim of as many as wait), which the backend's wake-up ends
//     when a domain becomes ready.
//   - Workers whose handlers returned together end their attempts with one
//     call: ClaimNext for those that succeeded, which also leases each
//     domain's next offset to the worker that ran the last, so that a
//     domain with a backlog keeps going without a claim in between (up to
//     worklease.MaxStreak offsets, then it waits behind the other
//     domains), and no offset submitted meanwhile can slip through;
//     RetryMany for those that failed.
//   - One timer renews the leases of every running handler, with one
//     ExtendMany for all that are due.
//
// A batch goes to the backend as soon as a call is free to take it (two
// of a kind at most are under way at once), with every job that finished
// while the calls before it ran: a job that finishes alone is ended at
// once, and under load the batches grow to what the backend takes.
//
// A failed attempt, a handler's error or panic (or its call of
// runtime.Goexit), is ended with RetryMany, after the Pool's
// [worklease.Backoff] delay, which the backend keeps: no worker waits it
// out, and nothing of the domain overtakes the offset. An offset out of
// retries becomes a dead letter, as the backend's options say
// (worklease.WithMaxRetries). A call that ends attempts and fails is made
// again, with the same backoff between, until it is answered (or the
// backend is closed, or Stop gives up waiting); a batch that failed counts
// as one error. A ClaimNext whose answer was lost answers the second time
// with the next lease it granted the first, while that lease is in
// flight. A call refused the second time because the lease ended by its
// holder's hand counts as the first call's outcome, not as a lost lease:
// only a lease that expired or that an operator took is reported lost
// (see [Stats]).
//
// The backend keeps each domain's order, its single lease and its fences:
// a Pool runs one offset of a domain at a time, in order, whatever the
// number of workers, pools or processes, and each [Job] carries the
// lease's [worklease.Token], whose fence a handler passes to storage.
//
// # Input
//
// [Pool.Submit] stores offsets through the backend's Enqueue, with a
// payload for the handler. It applies back-pressure: at most
// WithQueueLimit offsets submitted through the Pool are unfinished at
// once, and Submit waits for room (or returns [ErrQueueFull], with
// WithSubmitNoWait). Offsets stored another way (Enqueue on the backend,
// from another process) are run too: the Pool works on whatever is ready.
//
// # Leases
//
// If the backend's leases expire (worklease.WithLeaseTTL), the Pool
// renews the lease of each running handler at about a third of its TTL,
// jittered, together with the others due within a sixth of their TTL. If
// a renewal finds the lease gone (it expired before the
// renewal, say, or an operator revoked it), the handler's context is
// cancelled with a cause matching [ErrLeaseLost], and the attempt's
// outcome is dropped: the backend has given the offset another attempt,
// or made it a dead letter. Leases of crashed workers, of any process,
// are taken over by the next claim, and by the Pool's background Reap
// (WithReapEvery).
//
// # Shutdown
//
// [Pool.Stop] stops claiming, lets the running handlers finish, and once
// its context ends cancels them (the cause is [ErrStopped]); then it
// returns, with every goroutine of the Pool gone. Offsets not yet run stay
// queued in the backend. See Stop for what becomes of each attempt.
//
// # Events and counts
//
// WithObserver's observer hears [worklease.EventStarted] for each attempt
// and [worklease.EventLeaseLost] for each lease found gone; the backend's
// own observer hears the transitions (processed, retrying, dead-lettered,
// ...). [Pool.Stats] counts jobs, failures, panics and errors, for
// metrics.
package worker
