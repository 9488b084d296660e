package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/worklease/worklease"
)

// The calls that end attempts, each a batcher's: workers that finish
// together end their attempts with one ClaimNext (or SucceedMany, once
// the Pool stops), and those that fail together with one RetryMany.

// The batchers' sizes: the most attempts one call ends, and the most calls
// of a kind under way at once, each on a connection of its own with a
// database backend. Two calls under way keep a database busy; with four,
// batches were smaller and more calls held domains' rows at once, which
// producers storing into the same domains waited for, and a Pool on
// PostgreSQL ran fewer jobs a second (docs/performance.md).
const (
	maxEndBatch = 256
	maxEndCalls = 2
)

// A nextAnswer is ClaimNext's answer for one claim: its error, and the
// domain's next lease if the claim led to one.
type nextAnswer struct {
	err     error
	next    worklease.Claim
	granted bool
}

// A retryAnswer is RetryMany's answer for one failure.
type retryAnswer struct {
	res worklease.RetryResult
	err error
}

// A batchError is the error of a batch's call as a whole, which each of
// its workers gets: the call may have gone through or not, for every
// attempt in it. The worker that made the call counted it (see
// Pool.batchFailed).
type batchError struct{ err error }

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// isBatchError reports whether err is a batch's error.
func isBatchError(err error) bool {
	var b *batchError
	return errors.As(err, &b)
}

// batchFailed counts the error err of op, a call for n attempts, as one
// failed call, and returns it as each attempt's error.
func (p *Pool) batchFailed(op string, n int, err error) error {
	err = fmt.Errorf("worker: %s of %d: %w", op, n, err)
	p.callFailed(err)
	return &batchError{err}
}

// answered checks that the backend answered each of n requests.
func answered(op string, n, got int) error {
	if got != n {
		return fmt.Errorf("%s answered %d of %d", op, got, n)
	}
	return nil
}

// A backend may answer ClaimNext and SucceedMany in buffers its caller
// keeps from call to call, as the Manager's does: the Pool then ends its
// jobs without allocating. The workers' requests keep the buffers (see
// nextBuf).
type (
	claimNextInto interface {
		ClaimNextInto(ctx context.Context, claims, next []worklease.Claim, errs []error) ([]worklease.Claim, []error, error)
	}
	succeedManyInto interface {
		SucceedManyInto(ctx context.Context, claims []worklease.Claim, errs []error) ([]error, error)
	}
)

// A nextBuf holds the answers of the ClaimNext calls a worker makes, for
// a backend that fills them in.
type nextBuf struct {
	next []worklease.Claim
	errs []error
}

// The batchers' types.
type (
	nextBatcher    = batcher[worklease.Claim, nextAnswer, nextBuf]
	succeedBatcher = batcher[worklease.Claim, error, []error]
	retryBatcher   = batcher[worklease.Failure, retryAnswer, struct{}]
	nextRequest    = request[worklease.Claim, nextAnswer, nextBuf]
	succeedRequest = request[worklease.Claim, error, []error]
	retryRequest   = request[worklease.Failure, retryAnswer, struct{}]
)

// claimNext is the nexts batcher's call.
func (p *Pool) claimNext(batch []*nextRequest) error {
	r := batch[0]
	claims := r.args(batch)
	var next []worklease.Claim
	var errs []error
	var err error
	if p.nextInto != nil {
		next, errs, err = p.nextInto.ClaimNextInto(p.base, claims, r.buf.next, r.buf.errs)
	} else {
		next, errs, err = p.b.ClaimNext(p.base, claims)
	}
	if err == nil {
		err = answered("ClaimNext", len(claims), len(errs))
	}
	if err != nil {
		r.done()
		return p.batchFailed("ClaimNext", len(claims), err)
	}
	// The leases granted come in the order of the claims that led to
	// them, and only a domain's first claim may lead to one.
	j := 0
	for i, q := range batch {
		q.res.err = errs[i]
		if errs[i] == nil && j < len(next) && next[j].Domain == claims[i].Domain {
			q.res.next, q.res.granted = next[j], true
			j++
		}
	}
	if p.nextInto != nil { // keep the buffers, and none of what they held
		zero(next)
		zero(errs)
		r.buf.next, r.buf.errs = next[:0], errs[:0]
	}
	r.done()
	return nil
}

// succeedMany is the succeeds batcher's call.
func (p *Pool) succeedMany(batch []*succeedRequest) error {
	r := batch[0]
	claims := r.args(batch)
	var errs []error
	var err error
	if p.succeedInto != nil {
		errs, err = p.succeedInto.SucceedManyInto(p.base, claims, r.buf)
	} else {
		errs, err = p.b.SucceedMany(p.base, claims)
	}
	if err == nil {
		err = answered("SucceedMany", len(claims), len(errs))
	}
	r.done()
	if err != nil {
		return p.batchFailed("SucceedMany", len(claims), err)
	}
	for i, q := range batch {
		q.res = errs[i]
	}
	if p.succeedInto != nil {
		zero(errs)
		r.buf = errs[:0]
	}
	return nil
}

// retryMany is the retries batcher's call.
func (p *Pool) retryMany(batch []*retryRequest) error {
	failures := batch[0].args(batch)
	res, errs, err := p.b.RetryMany(p.base, failures)
	batch[0].done()
	if err == nil {
		err = answered("RetryMany", len(failures), min(len(res), len(errs)))
	}
	if err != nil {
		return p.batchFailed("RetryMany", len(failures), err)
	}
	for i, q := range batch {
		q.res = retryAnswer{res[i], errs[i]}
	}
	return nil
}
