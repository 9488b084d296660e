package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// fastBackoff retries at once, for tests that do not look at the delays.
var fastBackoff = worklease.Backoff{Base: time.Microsecond, Max: time.Microsecond, Jitter: -1}

// running is a Pool whose Run runs in a goroutine of its own.
type running struct {
	*worker.Pool
	ran chan error
}

// start makes a Pool of b and h and runs it until the test ends, when it
// stops it and checks that Run returned nil.
func start(t *testing.T, b worklease.Backend, h worker.Handler, opts ...worker.Option) *running {
	t.Helper()
	p, err := worker.New(b, h, opts...)
	require.NoError(t, err)
	return run(t, p)
}

// run runs p until the test ends, as start does.
func run(t *testing.T, p *worker.Pool) *running {
	t.Helper()
	r := &running{Pool: p, ran: make(chan error, 1)}
	go func() { r.ran <- p.Run(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops the Pool, whose handlers must return within ten seconds, and
// returns Run's error. It may be called more than once.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	err := <-r.ran // Stop returned: so did Run
	r.ran <- err   // for the next call
	return err
}

func newManager(t *testing.T, opts ...worklease.Option) *worklease.Manager {
	t.Helper()
	m, err := worklease.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// A store stands for the storage that handlers write to: it checks, as
// each attempt begins and ends, that a domain runs one attempt at a time,
// under growing fences, and applies its offsets in order, each once.
type store struct {
	mu      sync.Mutex
	running map[string]int64   // the offset of each domain's attempt under way
	fence   map[string]uint64  // each domain's highest fence so far
	applied map[string][]int64 // each domain's offsets whose attempt succeeded, in the order they did
	errs    []error
}

func newStore() *store {
	return &store{running: map[string]int64{}, fence: map[string]uint64{}, applied: map[string][]int64{}}
}

func (s *store) fail(format string, args ...any) {
	s.errs = append(s.errs, fmt.Errorf(format, args...))
}

// begin notes that an attempt at job began.
func (s *store) begin(job worker.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, off, f := job.Domain, job.Offset, job.Token.Fence()
	if other, busy := s.running[d]; busy {
		s.fail("%s/%d began while %s/%d ran", d, off, d, other)
	}
	s.running[d] = off
	if f <= s.fence[d] {
		s.fail("%s/%d: fence %d after %d", d, off, f, s.fence[d])
	}
	s.fence[d] = f
	if a := s.applied[d]; len(a) > 0 && off <= a[len(a)-1] {
		s.fail("%s/%d began after %d succeeded", d, off, a[len(a)-1])
	}
}

// end notes that job's attempt ended, as a success if ok.
func (s *store) end(job worker.Job, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[job.Domain] != job.Offset {
		s.fail("%s/%d ended, but %d was running", job.Domain, job.Offset, s.running[job.Domain])
	}
	delete(s.running, job.Domain)
	if ok {
		s.applied[job.Domain] = append(s.applied[job.Domain], job.Offset)
	}
}

// check fails t with the errors the store met.
func (s *store) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NoError(t, errors.Join(s.errs...))
}

// appliedOf returns the offsets of d applied so far.
func (s *store) appliedOf(d string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied[d])
}

// A recorder is an Observer that keeps every event, and hands those of
// chosen kinds to a channel as they come.
type recorder struct {
	mu     sync.Mutex
	events []worklease.Event
	subs   map[worklease.EventKind]chan worklease.Event
}

func newRecorder(kinds ...worklease.EventKind) *recorder {
	r := &recorder{subs: map[worklease.EventKind]chan worklease.Event{}}
	for _, k := range kinds {
		r.subs[k] = make(chan worklease.Event, 1000)
	}
	return r
}

func (r *recorder) Observe(e worklease.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	ch := r.subs[e.Kind]
	r.mu.Unlock()
	if ch != nil {
		ch <- e
	}
}

// next returns the next event of kind, which must come within a minute.
func (r *recorder) next(t *testing.T, kind worklease.EventKind) worklease.Event {
	t.Helper()
	select {
	case e := <-r.subs[kind]:
		return e
	case <-time.After(time.Minute):
		t.Fatalf("no %v event within a minute", kind)
		return worklease.Event{}
	}
}

// of returns the kinds of d's events so far, in order.
func (r *recorder) of(d string) []worklease.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []worklease.EventKind
	for _, e := range r.events {
		if e.Domain == d {
			out = append(out, e.Kind)
		}
	}
	return out
}

// count returns how many events of kind there were.
func (r *recorder) count(kind worklease.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// eventually waits until cond holds, looking every few milliseconds, for
// a minute at most: for conditions that no event announces, such as a
// count going down just after the event that a test could wait for.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// errIgnored is a handler's error whose text no test reads.
var errIgnored = errors.New("failed")
