package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/worklease/worklease"
)

// A worker is one of a Pool's goroutines: it takes a ready offset from
// the Pool's claimer, runs the handler on it, and ends the attempt through
// the Pool's batchers, going on with the domain's next offset when the
// backend hands it over (ClaimNext), so that a domain with a backlog keeps
// its worker for up to worklease.MaxStreak offsets in a row without a
// claim in between.
type worker struct {
	p      *Pool
	ctx    context.Context // its handlers' contexts derive from it
	cancel context.CancelCauseFunc

	// Its requests in the Pool's batchers, one at a time in each.
	nextReq    *nextRequest
	succeedReq *succeedRequest
	retryReq   *retryRequest

	// What the claimer hands the worker: a claim (claimOK), nothing (the
	// Pool stops), or the lead of the next claim. Set before a send on
	// claimed, read after the receive.
	claimed chan struct{}
	claim   worklease.Claim
	claimOK bool
	lead    bool

	// Counts, summed by Stats. Each worker writes only its own.
	inFlight     atomic.Bool
	started      atomic.Uint64
	succeeded    atomic.Uint64
	retried      atomic.Uint64
	deadLettered atomic.Uint64
	panicked     atomic.Uint64
	_            [64]byte // keeps the next worker's counts off this one's cache line
}

func newWorker(p *Pool) *worker {
	w := &worker{
		p: p, claimed: make(chan struct{}, 1),
		nextReq:    newRequest[worklease.Claim, nextAnswer, nextBuf](),
		succeedReq: newRequest[worklease.Claim, error, []error](),
		retryReq:   newRequest[worklease.Failure, retryAnswer, struct{}](),
	}
	w.ctx, w.cancel = context.WithCancelCause(p.handlerCtx)
	return w
}

// run is the worker's goroutine.
func (w *worker) run() { w.serve(worklease.Claim{}, false) }

// serve claims work and runs it until the Pool stops, starting with next,
// the domain's next offset that ClaimNext handed over, if any.
func (w *worker) serve(next worklease.Claim, chained bool) {
	goexit := false // a handler called runtime.Goexit: another goroutine goes on
	defer func() {
		if !goexit {
			w.cancel(nil)
		}
	}()
	for {
		c := next
		if !chained {
			var ok bool
			if c, ok = w.p.claims.claim(w); !ok {
				return
			}
		}
		next, chained = w.work(c, &goexit)
	}
}

// work runs the handler on c, and ends the attempt; it returns the claim
// of the domain's next offset if the backend handed it over. If the
// handler calls runtime.Goexit, which ends the goroutine, work sets
// *goexit and a new goroutine ends the attempt and goes on serving.
func (w *worker) work(c worklease.Claim, goexit *bool) (worklease.Claim, bool) {
	p := w.p
	w.inFlight.Store(true)
	w.started.Add(1)
	p.observe(worklease.EventStarted, &c, nil)
	ctx, cancel := w.ctx, context.CancelCauseFunc(nil)
	if !c.ExpiresAt.IsZero() {
		ctx, cancel = context.WithCancelCause(w.ctx)
		p.renew.start(w, c, cancel)
		if p.cfg.reapAuto && p.ttl.Load() == 0 {
			p.sawTTL(c.ExpiresAt.Sub(p.cfg.clock.Now()))
		}
	}
	err := w.call(ctx, cancel, &c, goexit)
	return w.finish(ctx, c, cancel, err)
}

// goexited is called, on the goroutine that runs w's handler on c with
// ctx, when the handler called runtime.Goexit: that goroutine ends (serve
// sees goexit set), and a new one ends the attempt as failed with err and
// goes on serving.
func (w *worker) goexited(ctx context.Context, cancel context.CancelCauseFunc, c worklease.Claim, goexit *bool, err error) {
	*goexit = true
	w.p.goroutines.Go(func() { w.serve(w.finish(ctx, c, cancel, err)) })
}

// finish ends the attempt on c, whose handler ran with ctx and returned
// err, and returns the claim of the domain's next offset if the backend
// handed it over. cancel, if not nil, cancels ctx.
func (w *worker) finish(ctx context.Context, c worklease.Claim, cancel context.CancelCauseFunc, err error) (worklease.Claim, bool) {
	p := w.p
	stopped := err != nil && errors.Is(context.Cause(ctx), ErrStopped)
	lost := false
	if cancel != nil {
		lost = p.renew.stop(w)
		cancel(nil)
	}
	w.inFlight.Store(false)
	if lost { // told already; the attempt is the backend's to end
		p.settleLost(&c)
		return worklease.Claim{}, false
	}
	if err == nil {
		return w.succeed(&c)
	}
	delay := p.cfg.backoff.Delay(c.Attempt)
	if stopped {
		delay = 0
	}
	w.retry(&c, err, delay)
	return worklease.Claim{}, false
}

// errGoexit is the Value of the PanicError of a handler that called
// runtime.Goexit.
var errGoexit = errors.New("handler called runtime.Goexit")

// call runs the handler on c with ctx, recovering a panic as a failed
// attempt, and sees to a call of runtime.Goexit (see goexited).
func (w *worker) call(ctx context.Context, cancel context.CancelCauseFunc, c *worklease.Claim, goexit *bool) (err error) {
	returned := false
	defer func() {
		if v := recover(); v != nil {
			w.panicked.Add(1)
			err = &PanicError{Value: v, Stack: debug.Stack()}
		} else if !returned {
			w.panicked.Add(1)
			w.goexited(ctx, cancel, *c, goexit, &PanicError{Value: errGoexit, Stack: debug.Stack()})
		}
	}()
	err = w.p.h(ctx, Job{Domain: c.Domain, Offset: c.Offset, Attempt: c.Attempt, Token: c.Token, Payload: c.Payload})
	returned = true
	return err
}

// succeed ends c's attempt as processed, with ClaimNext unless the Pool is
// stopping, and returns what ClaimNext handed over.
func (w *worker) succeed(c *worklease.Claim) (next worklease.Claim, chained bool) {
	p := w.p
	var lease error // the claim's error: the lease is gone
	// After an error the call may have gone through, and ClaimNext's may
	// have granted the next lease: a ClaimNext repeated answers with it.
	chain := !p.isStopping()
	again := false // a call before failed, perhaps after it went through
	ended := w.end(func() error {
		var err error
		if chain {
			w.nextReq.req[0] = *c
			var a nextAnswer
			a, err = p.nexts.do(w.nextReq)
			w.nextReq.req[0] = worklease.Claim{}
			if err == nil {
				err, next, chained = a.err, a.next, a.granted
			}
		} else {
			w.succeedReq.req[0] = *c
			var e error
			e, err = p.succeeds.do(w.succeedReq)
			w.succeedReq.req[0] = worklease.Claim{}
			if err == nil {
				err = e
			}
		}
		switch {
		case err == nil:
		case isBatchError(err):
			again = true
			return err
		case again && endedByHolder(err): // by the call before
		case !leaseGone(err):
			return fmt.Errorf("worker: end of %s/%d: %w", c.Domain, c.Offset, err)
		default:
			lease = err
		}
		return nil
	})
	switch {
	case !ended:
	case lease != nil:
		p.leaseLost(*c, lease)
		p.settleLost(c)
	default:
		w.succeeded.Add(1)
		p.q.done(queueKey{c.Domain, c.Offset})
	}
	return next, chained
}

// retry ends c's attempt as failed, with cause, to be retried after delay
// (or dead-lettered).
func (w *worker) retry(c *worklease.Claim, cause error, delay time.Duration) {
	p := w.p
	var res worklease.RetryResult
	var lease error
	again := false  // a call before failed, perhaps after it went through
	landed := false // it did
	ended := w.end(func() error {
		w.retryReq.req[0] = worklease.Failure{Claim: *c, Cause: cause, Delay: delay}
		a, err := p.retries.do(w.retryReq)
		w.retryReq.req[0] = worklease.Failure{}
		if err == nil {
			res, err = a.res, a.err
		}
		switch {
		case err == nil:
		case isBatchError(err):
			again = true
			return err
		case again && endedByHolder(err): // by the call before
			landed = true
			return nil
		case leaseGone(err):
			lease = err
			return nil
		}
		if err != nil {
			again = true
			return fmt.Errorf("worker: retry of %s/%d: %w", c.Domain, c.Offset, err)
		}
		return nil
	})
	switch {
	case !ended:
	case lease != nil:
		p.leaseLost(*c, lease)
		p.settleLost(c)
	case landed: // retried or dead-lettered, which the lost answer said
		p.settleLost(c)
		if p.deadLettered(c) {
			w.deadLettered.Add(1)
		} else {
			w.retried.Add(1)
		}
	case res.DeadLettered:
		w.deadLettered.Add(1)
		p.q.done(queueKey{c.Domain, c.Offset})
	default:
		w.retried.Add(1)
	}
}

// endedByHolder reports whether err, a backend's answer to a call made
// again with a lease's token after the call before failed, says that the
// lease ended by its holder's hand, which was then the call before: a lease
// that expired or that an operator took answers ErrLeaseExpired or
// ErrLeaseRevoked instead.
func endedByHolder(err error) bool {
	return errors.Is(err, worklease.ErrNoLease) || errors.Is(err, worklease.ErrTokenMismatch)
}

// end makes the call that ends an attempt, again after each error, with
// the Pool's backoff between, and reports whether it went through: not if
// the backend is closed, or if the handlers were cancelled while it
// waited to call again (the lease then stays, to expire if it does). An
// error of the batch the call went in was counted once, by the worker
// that made the batch's call.
func (w *worker) end(call func() error) bool {
	p := w.p
	for n := 0; ; n++ {
		err := call()
		if err == nil {
			return true
		}
		if !isBatchError(err) {
			p.callFailed(err)
		}
		if errors.Is(err, worklease.ErrClosed) || !p.sleep(p.cfg.backoff.Delay(n), p.handlerCtx.Done()) {
			return false
		}
	}
}
