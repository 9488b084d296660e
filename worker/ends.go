package worker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/worklease/worklease"
)

// The calls that end attempts, each a batcher's: workers that finish
// together end their attempts with one ClaimNext (or SucceedMany, once
// the Pool stops), and those that fail together with one RetryMany.

// The batchers' sizes: the most attempts one call ends, and the most calls
// of a kind under way at once, each on a connection of its own with a
// database backend.
const (
	maxEndBatch = 256
	maxEndCalls = 4
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

// claimNext is the nexts batcher's call.
func (p *Pool) claimNext(claims []worklease.Claim, out []nextAnswer) ([]nextAnswer, error) {
	next, errs, err := p.b.ClaimNext(p.base, claims)
	if err == nil {
		err = answered("ClaimNext", len(claims), len(errs))
	}
	if err != nil {
		return nil, p.batchFailed("ClaimNext", len(claims), err)
	}
	out = slices.Grow(out[:0], len(claims))[:len(claims)]
	// The leases granted come in the order of the claims that led to
	// them, and only a domain's first claim may lead to one.
	j := 0
	for i := range claims {
		out[i].err = errs[i]
		if errs[i] == nil && j < len(next) && next[j].Domain == claims[i].Domain {
			out[i].next, out[i].granted = next[j], true
			j++
		}
	}
	return out, nil
}

// succeedMany is the succeeds batcher's call.
func (p *Pool) succeedMany(claims []worklease.Claim, _ []error) ([]error, error) {
	errs, err := p.b.SucceedMany(p.base, claims)
	if err == nil {
		err = answered("SucceedMany", len(claims), len(errs))
	}
	if err != nil {
		return nil, p.batchFailed("SucceedMany", len(claims), err)
	}
	return errs, nil
}

// retryMany is the retries batcher's call.
func (p *Pool) retryMany(failures []worklease.Failure, out []retryAnswer) ([]retryAnswer, error) {
	res, errs, err := p.b.RetryMany(p.base, failures)
	if err == nil {
		err = answered("RetryMany", len(failures), min(len(res), len(errs)))
	}
	if err != nil {
		return nil, p.batchFailed("RetryMany", len(failures), err)
	}
	out = slices.Grow(out[:0], len(failures))[:len(failures)]
	for i := range out {
		out[i] = retryAnswer{res[i], errs[i]}
	}
	return out, nil
}
