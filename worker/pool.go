package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worklease/worklease"
)

// A Job is one attempt at one offset, as a handler gets it.
type Job struct {
	Domain  string
	Offset  int64
	Attempt int // 1 for the first attempt, and one more after each failed one
	// Token is the lease the attempt runs under. Pass Token.Fence() with
	// every write to storage, and have storage refuse a fence lower than
	// one it has seen: a worker that lost its lease, which another worker
	// may hold by now, then cannot overwrite the newer holder's work.
	Token worklease.Token
	// Payload is what was stored with the offset (Submit's payload), a
	// copy the handler may keep; nil if none was, or if the backend keeps
	// none.
	Payload []byte
}

// A Handler does the work of one attempt. It returns nil when the work is
// done, which ends the offset as processed, and an error otherwise, which
// makes the attempt a failed one: the offset is retried after the Pool's
// backoff, or becomes a dead letter once it has no retries left (see
// worklease.WithMaxRetries). A panic is a failed attempt too, with a
// *PanicError as its cause, and so is a handler's call of runtime.Goexit
// (t.FailNow in a test, say), which ends the worker's goroutine: another
// takes its place.
//
// ctx is cancelled when the attempt should stop: when the Pool found its
// lease gone (the cause matches ErrLeaseLost; the work's outcome is
// discarded, and the offset is someone else's to do), or when Stop gave up
// waiting (the cause is ErrStopped; an error then ends the attempt as
// failed, without a delay). A handler must return soon after ctx is done.
//
// The Pool runs handlers of different domains at once, one at a time in
// each domain, in the order of the domain's offsets.
type Handler func(ctx context.Context, job Job) error

// A Pool runs a Handler on the offsets of a worklease.Backend, as many at
// once as it has workers, each domain's in order and one at a time, with
// retries, dead letters and lease renewal. Use New; the zero Pool is not
// usable. Its methods are safe for concurrent use.
//
// A Pool holds no payload but those of the jobs its workers run: Submit
// and Append hand the payload to the backend, which keeps it, and a
// worker claims its next job only once it is idle, so the payloads in a
// Pool's memory are at most one per worker.
type Pool struct {
	b   worklease.Backend
	h   Handler
	cfg config
	q   *queue

	// What the workers share to call the backend for many at once: their
	// claims, their attempts' ends, and their leases' renewals.
	claims   claimer
	nexts    nextBatcher
	succeeds succeedBatcher
	retries  retryBatcher
	renew    renewer

	// b's calls that answer in its caller's buffers, if it has them.
	claimInto   waitClaimInto
	nextInto    claimNextInto
	succeedInto succeedManyInto

	// base carries Run's context's values without its cancellation: the
	// Pool's calls that end attempts and renew leases use it, so that they
	// go through during a shutdown. Set by Run, before any worker starts.
	base context.Context

	stopping chan struct{} // closed once Stop begins, Run's context ends or the backend is closed: claim no more
	// isStopped is set just before stopping is closed: a load is cheaper
	// than a receive, for the checks every job makes.
	isStopped atomic.Bool
	done      chan struct{} // closed once Run's goroutines have all exited
	// goroutines counts Run's goroutines, and those that take a worker's
	// place after a handler called runtime.Goexit.
	goroutines sync.WaitGroup

	// Run's contexts: claims end with claimCtx; handlers' contexts derive
	// from handlerCtx, which Stop cancels, with ErrStopped, when it gives
	// up waiting. Set by Run before any worker starts.
	claimCtx       context.Context
	cancelClaims   context.CancelFunc
	handlerCtx     context.Context
	cancelHandlers context.CancelCauseFunc

	ttl      atomic.Int64  // a lease TTL seen on a claim, for the default reaping; 0 until one
	ttlKnown chan struct{} // closed when ttl is first set
	ttlOnce  sync.Once

	errors atomic.Uint64 // backend calls that failed (see WithErrorFunc)
	lost   atomic.Uint64 // leases found gone

	mu      sync.Mutex // guards ran, stopped, fatal and workers
	ran     bool       // Run began
	stopped bool       // stopping is closed
	fatal   error      // the backend's error that stopped the Pool, if any
	workers []*worker
}

// New returns a Pool that runs h on the work of b, configured by opts; it
// returns an error wrapping worklease.ErrInvalidConfig for an option out of
// range. The Pool does nothing until Run.
func New(b worklease.Backend, h Handler, opts ...Option) (*Pool, error) {
	if b == nil || h == nil {
		return nil, fmt.Errorf("%w: worker: New needs a backend and a handler", worklease.ErrInvalidConfig)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		b: b, h: h, cfg: cfg, q: newQueue(cfg.queueLimit), base: context.Background(),
		stopping: make(chan struct{}), done: make(chan struct{}), ttlKnown: make(chan struct{}),
	}
	p.claims.p, p.renew.p = p, p
	p.claimInto, _ = b.(waitClaimInto)
	p.nextInto, _ = b.(claimNextInto)
	p.succeedInto, _ = b.(succeedManyInto)
	p.nexts = nextBatcher{call: p.claimNext, maxBatch: cfg.endBatch, maxCalls: cfg.endCalls}
	p.succeeds = succeedBatcher{call: p.succeedMany, maxBatch: cfg.endBatch, maxCalls: cfg.endCalls}
	p.retries = retryBatcher{call: p.retryMany, maxBatch: cfg.endBatch, maxCalls: cfg.endCalls}
	return p, nil
}

// Submit stores offset of domain, with payload (nil for none), for the
// Pool to run, through the backend's Enqueue, and returns Enqueue's status
// and error: Enqueued for an offset it stored, AlreadyQueued for one
// queued before; AlreadyAcquired, AlreadyProcessed or AlreadyFailed for an
// offset that is in flight or finished, which Submit stores nowhere; an
// error matching worklease.ErrPayloadMismatch for an offset held with
// another payload. Each domain's
// offsets run in the order they were first submitted (or in the backend's
// order, with worklease.LIFO).
//
// At the queue limit (see WithQueueLimit), Submit of an offset the Pool
// does not count yet waits for room, until ctx ends (it returns ctx's
// error), or until the Pool stops; with WithSubmitNoWait it returns
// ErrQueueFull at once. Submit returns ErrStopped once the Pool is
// stopping. It may be called before Run: the offset waits in the backend.
//
// A handler that submits follow-up work to its own Pool holds a slot of
// the queue while it waits for one: with every slot held so, Submit waits
// until its ctx ends. Such a Pool should have no limit (WithQueueLimit(0))
// or not wait (WithSubmitNoWait), or the handler should store the work
// with the backend's Enqueue, which no limit holds back.
func (p *Pool) Submit(ctx context.Context, domain string, offset int64, payload []byte) (worklease.AcquireStatus, error) {
	if p.isStopping() {
		return 0, ErrStopped
	}
	k := queueKey{domain, offset}
	took, err := p.q.add(ctx, k, p.cfg.noWait, p.stopping)
	if err != nil {
		return 0, err
	}
	st, err := p.b.Enqueue(ctx, domain, offset, payload)
	if took && (err != nil || st != worklease.Enqueued && st != worklease.AlreadyQueued) {
		p.q.done(k)
	}
	return st, err
}

// Append stores payload for domain under the offset the backend assigns,
// the next in the domain's order (see worklease.Manager.Append), for the
// Pool to run, and returns the backend's answer: the offset, Enqueued for
// one it stored; for an Append repeated with the key of an earlier one
// (opts.Key), that Append's offset and its state now. Use it for work that
// has no offset of its own ("send an email to user 7"): the backend
// numbers it, so that producers never collide, and, with a key, a call
// repeated after an unknown outcome stores it once.
//
// The offsets Append stores run as Submit's do, each domain's in order.
// Unlike Submit, Append takes no room in the queue that WithQueueLimit
// bounds, which counts the offsets Submit names: read the backend's
// depth with its Totals (Queued) to hold producers back. Append returns
// ErrStopped once the Pool is stopping, and the backend's errors (among
// them worklease.ErrPayloadTooLarge, and worklease.ErrPayloadMismatch for
// a key repeated with another payload); it may be called before Run.
func (p *Pool) Append(ctx context.Context, domain string, payload []byte, opts worklease.AppendOptions) (worklease.AppendResult, error) {
	if p.isStopping() {
		return worklease.AppendResult{}, ErrStopped
	}
	return p.b.Append(ctx, domain, payload, opts)
}

// Run runs the Pool's workers until Stop, or until ctx ends, and returns
// once every goroutine it started has exited: nil after Stop, ctx's error
// if ctx ended first (which stops the Pool as a Stop that gives up waiting
// at once would), and an error matching worklease.ErrClosed if the backend
// was closed under it. Handlers' contexts carry ctx's values. Run may be
// called once; it returns ErrStopped if the Pool was stopped before.
func (p *Pool) Run(ctx context.Context) error {
	p.mu.Lock()
	switch {
	case p.ran:
		p.mu.Unlock()
		return errors.New("worker: Run called twice")
	case p.stopped:
		p.mu.Unlock()
		return ErrStopped
	}
	p.ran = true
	p.base = context.WithoutCancel(ctx)
	p.claimCtx, p.cancelClaims = context.WithCancel(p.base)
	p.handlerCtx, p.cancelHandlers = context.WithCancelCause(p.base)
	p.workers = make([]*worker, p.cfg.workers)
	for i := range p.workers {
		p.workers[i] = newWorker(p)
	}
	// A ctx that ended before Run stops the Pool before any claim.
	early := ctx.Err()
	if early != nil {
		p.stopLocked()
	}
	p.mu.Unlock()

	for _, w := range p.workers {
		p.goroutines.Go(w.run)
	}
	if p.cfg.reapAuto || p.cfg.reapEvery != 0 {
		p.goroutines.Go(p.reap)
	}
	finished := make(chan struct{})
	go func() {
		p.goroutines.Wait()
		close(finished)
	}()
	err := early
	select {
	case <-finished:
	case <-ctx.Done(): // also while Stop waits: handlers stop now
		if p.stop() {
			err = ctx.Err()
		}
		p.cancelHandlers(ErrStopped)
	}
	<-finished
	p.renew.close()
	p.cancelHandlers(ErrStopped) // releases the contexts
	p.cancelClaims()
	p.mu.Lock()
	if p.fatal != nil {
		err = p.fatal
	}
	p.mu.Unlock()
	close(p.done)
	return err
}

// Stop stops the Pool: it claims no more work, lets the handlers that run
// finish, and returns once Run's goroutines have all exited. If ctx ends
// first, Stop cancels the handlers' contexts, with ErrStopped as their
// cause, waits for them to return, and returns ctx's error.
//
// Every attempt that ran ends as the handler said: processed, or failed
// and retried (or dead-lettered) with the Pool's backoff, except that a
// handler that Stop cancelled and that returned an error is retried
// without a delay; that counts as a failed attempt. A worker that was
// given its domain's next offset as Stop began runs it too. Offsets queued
// stay queued in the backend, each domain's in order, for the next Pool:
// nothing the backend acknowledged is lost. An attempt whose end the
// backend did not answer (it was unreachable until ctx ended) keeps its
// lease, which expires if leases do (see worklease.WithLeaseTTL).
//
// A handler that ignores its context's cancellation keeps Stop waiting.
// Stop may be called more than once, and before or without Run, which then
// returns ErrStopped.
func (p *Pool) Stop(ctx context.Context) error {
	p.mu.Lock()
	ran := p.ran // if not, Run sees the Pool stopped and returns at once
	p.stopLocked()
	p.mu.Unlock()
	if !ran {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	p.cancelHandlers(ErrStopped)
	<-p.done
	return ctx.Err()
}

// stop marks the Pool stopped and stops its claims, and reports whether
// this call did.
func (p *Pool) stop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopLocked()
}

// stopLocked is stop; p.mu must be held.
func (p *Pool) stopLocked() bool {
	if p.stopped {
		return false
	}
	p.stopped = true
	p.isStopped.Store(true)
	close(p.stopping)
	if p.ran {
		p.cancelClaims()
	}
	return true
}

// fail stops the Pool after the backend said it is closed; Run returns
// err.
func (p *Pool) fail(err error) {
	p.mu.Lock()
	if p.fatal == nil {
		p.fatal = err
	}
	p.mu.Unlock()
	p.stop()
}

// isStopping reports whether stopping is closed, or about to be.
func (p *Pool) isStopping() bool { return p.isStopped.Load() }

// callFailed notes an error of a backend call that is no answer about a
// job, and stops the Pool if the backend is closed.
func (p *Pool) callFailed(err error) {
	p.errors.Add(1)
	if f := p.cfg.errorFunc; f != nil {
		f(err)
	}
	if errors.Is(err, worklease.ErrClosed) {
		p.fail(err)
	}
}

// sawTTL notes the TTL of a lease the Pool claimed, for the default
// reaping.
func (p *Pool) sawTTL(ttl time.Duration) {
	if p.ttl.Load() != 0 {
		return
	}
	p.ttl.Store(int64(max(ttl, minRenewTTL)))
	p.ttlOnce.Do(func() { close(p.ttlKnown) })
}

// reap calls the backend's Reap every WithReapEvery, or by default every
// lease TTL once it knows one, until the Pool stops.
func (p *Pool) reap() {
	every := p.cfg.reapEvery
	if p.cfg.reapAuto {
		select {
		case <-p.ttlKnown:
			every = time.Duration(p.ttl.Load())
		case <-p.stopping:
			return
		}
	}
	for p.sleep(every, p.stopping) {
		if _, err := p.b.Reap(p.claimCtx); err != nil && p.claimCtx.Err() == nil {
			p.callFailed(fmt.Errorf("worker: Reap: %w", err))
		}
	}
}

// sleep waits d, by the Pool's clock, and reports whether it did: false if
// stop was closed first.
func (p *Pool) sleep(d time.Duration, stop <-chan struct{}) bool {
	ch := make(chan struct{})
	t := p.cfg.clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-stop:
		if !t.Stop() {
			<-ch // its function runs: let it end before returning
		}
		return false
	}
}

// observe tells the Pool's observer, if any, about c.
func (p *Pool) observe(kind worklease.EventKind, c *worklease.Claim, cause error) {
	if o := p.cfg.observer; o != nil {
		o.Observe(worklease.Event{
			Kind: kind, Domain: c.Domain, Offset: c.Offset, Attempt: c.Attempt, Token: c.Token, Cause: cause, At: p.cfg.clock.Now(),
		})
	}
}

// leaseLost notes that c's lease was found gone, with err, the backend's
// error that said so.
func (p *Pool) leaseLost(c worklease.Claim, err error) {
	p.lost.Add(1)
	p.observe(worklease.EventLeaseLost, &c, err)
}

// deadLettered reports whether c's offset is a dead letter after c's
// attempt, its last: whether a Retry of it, whose answer was lost, made it
// one.
func (p *Pool) deadLettered(c *worklease.Claim) bool {
	dls, err := p.b.DeadLetters(p.base, c.Domain)
	if err != nil {
		p.callFailed(fmt.Errorf("worker: DeadLetters: %w", err))
		return false
	}
	for _, dl := range dls {
		if dl.Offset == c.Offset && dl.Attempts == c.Attempt {
			return true
		}
	}
	return false
}

// settleLost gives back the queue slot of c's offset, whose lease ended
// without an answer that said how, if the offset is finished: an expiry
// that was its last attempt made it a dead letter, say. Otherwise it waits
// in the backend, and the worker that finishes it frees the slot.
func (p *Pool) settleLost(c *worklease.Claim) {
	k := queueKey{c.Domain, c.Offset}
	if !p.q.holds(k) {
		return
	}
	info, err := p.b.Inspect(p.base, c.Domain)
	if err != nil {
		p.callFailed(fmt.Errorf("worker: Inspect: %w", err))
		return
	}
	if !slices.Contains(info.Backlog, c.Offset) && !(info.Leased && info.Lease.Offset == c.Offset) {
		p.q.done(k)
	}
}
