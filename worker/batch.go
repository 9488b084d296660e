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
// its request, and the buffers of the calls it makes, for all its calls.
type batcher[Req, Res any] struct {
	// call is the backend call: it returns a result for each request, in
	// order, or an error for them all. It may return them in out, a
	// buffer of its last call's results.
	call     func(reqs []Req, out []Res) ([]Res, error)
	maxBatch int // the most requests in one call
	maxCalls int // the most calls under way at once

	mu      sync.Mutex // guards pending and calls
	pending []*request[Req, Res]
	calls   int // under way, or handed on to be made
}

// A request is one worker's in a batcher.
type request[Req, Res any] struct {
	req Req
	// Set by the worker that made the call, before signal: the request's
	// result and error, or lead, to make the next call.
	res    Res
	err    error
	lead   bool
	signal chan struct{} // one send for each of the above

	// The buffers of the calls this request's worker makes.
	batch   []*request[Req, Res]
	args    []Req
	results []Res
}

func newRequest[Req, Res any]() *request[Req, Res] {
	return &request[Req, Res]{signal: make(chan struct{}, 1)}
}

// do makes r.req, in a call with other requests, and returns its result
// and error, or the call's error.
func (b *batcher[Req, Res]) do(r *request[Req, Res]) (Res, error) {
	b.mu.Lock()
	if b.calls < b.maxCalls {
		b.calls++
	} else {
		b.pending = append(b.pending, r)
		b.mu.Unlock()
		<-r.signal
		if !r.lead {
			out, err := r.res, r.err
			r.res, r.err = *new(Res), nil // keep no result past its use
			return out, err
		}
		r.lead = false
		b.mu.Lock()
	}
	// r makes a call: its own request first, then the oldest waiting.
	n := min(len(b.pending), b.maxBatch-1)
	batch := append(append(r.batch[:0], r), b.pending[:n]...)
	b.pending = append(b.pending[:0], b.pending[n:]...)
	b.mu.Unlock()

	args := r.args[:0]
	for _, q := range batch {
		args = append(args, q.req)
	}
	res, err := b.call(args, r.results[:0])
	clear(args) // the requests may hold payloads: keep none
	r.args = args[:0]

	// The next call first, so that the backend is kept busy.
	b.mu.Lock()
	if len(b.pending) > 0 {
		next := b.pending[0]
		b.pending = append(b.pending[:0], b.pending[1:]...)
		next.lead = true
		next.signal <- struct{}{}
	} else {
		b.calls--
	}
	b.mu.Unlock()

	for i, q := range batch {
		if err != nil {
			q.res, q.err = *new(Res), err
		} else {
			q.res, q.err = res[i], nil
		}
		if q != r {
			q.signal <- struct{}{}
		}
	}
	clear(batch)
	r.batch = batch[:0]
	if err == nil {
		clear(res)
		r.results = res[:0]
	}
	out, outErr := r.res, r.err
	r.res, r.err = *new(Res), nil
	return out, outErr
}
