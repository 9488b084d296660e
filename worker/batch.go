package worker

import "sync"

// A batcher makes one backend call for the requests of many workers, as a
// database groups the commits of many transactions into one flush: a
// worker whose request finds fewer than maxCalls calls under way makes a
// call itself, at once, with its request and those that wait, up to
// maxBatch; a request that finds them all under way waits, and the first
// call to end hands it on to be made (its worker makes the next call,
// with every request that came meanwhile). So a request made alone goes
// at once, and under load the batches grow to what the backend can take,
// with no timer: a worker waits for a batch only while the backend is
// busy with earlier ones.
//
// Each worker has at most one request in a batcher at a time, so it keeps
// its request, and the buffers of the calls it makes, for all its calls: a
// call costs no allocation once they have grown.
type batcher[Req, Res, Buf any] struct {
	// call is the backend call for batch, whose first request's worker
	// makes it with that request's buffers: it sets each request's res, or
	// returns an error for them all.
	call     func(batch []*request[Req, Res, Buf]) error
	maxBatch int // the most requests in one call
	maxCalls int // the most calls under way at once

	mu      sync.Mutex // guards pending and calls
	pending []*request[Req, Res, Buf]
	calls   int // under way, or handed on to be made
}

// A request is one worker's in a batcher.
type request[Req, Res, Buf any] struct {
	// req is the request, set by its worker before do: an array of one,
	// so that a call made for it alone passes req[:] as it is.
	req [1]Req
	// Set by the worker that made the call, before signal: the request's
	// result and error, or lead, to make the next call.
	res    Res
	err    error
	lead   bool
	signal chan struct{} // one send for each of the above

	// The buffers of the calls this request's worker makes.
	batch []*request[Req, Res, Buf]
	reqs  []Req // the requests of a batch of more than one
	buf   Buf   // the call's own
}

func newRequest[Req, Res, Buf any]() *request[Req, Res, Buf] {
	return &request[Req, Res, Buf]{signal: make(chan struct{}, 1)}
}

// args returns the requests of batch, whose first is r.
func (r *request[Req, Res, Buf]) args(batch []*request[Req, Res, Buf]) []Req {
	if len(batch) == 1 {
		return r.req[:]
	}
	reqs := r.reqs[:0]
	for _, q := range batch {
		reqs = append(reqs, q.req[0])
	}
	r.reqs = reqs
	return reqs
}

// done forgets the requests args returned: they may hold payloads, and a
// Pool keeps none but its running jobs'.
func (r *request[Req, Res, Buf]) done() {
	zero(r.reqs)
	r.reqs = r.reqs[:0]
}

// do makes r.req, in a call with other requests, and returns its result
// and error, or the call's error. r.req is left as the caller set it.
func (b *batcher[Req, Res, Buf]) do(r *request[Req, Res, Buf]) (Res, error) {
	b.mu.Lock()
	if b.calls < b.maxCalls {
		b.calls++
	} else {
		b.pending = append(b.pending, r)
		b.mu.Unlock()
		<-r.signal
		if !r.lead {
			return r.take()
		}
		r.lead = false
		b.mu.Lock()
	}
	// r makes a call: its own request first, then the oldest waiting.
	batch := append(r.batch[:0], r)
	if len(b.pending) > 0 {
		n := min(len(b.pending), b.maxBatch-1)
		batch = append(batch, b.pending[:n]...)
		zero(b.pending[copy(b.pending, b.pending[n:]):])
		b.pending = b.pending[:len(b.pending)-n]
	}
	b.mu.Unlock()

	err := b.call(batch)

	// The next call first, so that the backend is kept busy.
	b.mu.Lock()
	if len(b.pending) > 0 {
		next := b.pending[0]
		zero(b.pending[copy(b.pending, b.pending[1:]):])
		b.pending = b.pending[:len(b.pending)-1]
		next.lead = true
		next.signal <- struct{}{}
	} else {
		b.calls--
	}
	b.mu.Unlock()

	for _, q := range batch {
		if err != nil {
			var none Res
			q.res, q.err = none, err
		}
		if q != r {
			q.signal <- struct{}{}
		}
	}
	zero(batch)
	r.batch = batch[:0]
	return r.take()
}

// take returns r's result and error, and keeps neither.
func (r *request[Req, Res, Buf]) take() (Res, error) {
	out, err := r.res, r.err
	var none Res
	r.res, r.err = none, nil
	return out, err
}

// zero sets the elements of s to their zero value. Most batches are of one
// request, which it clears with a plain store rather than clear's bulk one.
func zero[T any](s []T) {
	switch len(s) {
	case 0:
	case 1:
		var none T
		s[0] = none
	default:
		clear(s)
	}
}
