package worker

import (
	"fmt"
	"time"

	"github.com/worklease/worklease"
)

// An Option configures a Pool. New applies options in order and validates
// the result.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// The defaults of a Pool's settings.
const (
	// DefaultWorkers is how many handlers a Pool runs at once unless
	// WithWorkers says otherwise.
	DefaultWorkers = 16
	// DefaultQueueLimit is how many offsets submitted through a Pool may
	// wait unfinished unless WithQueueLimit says otherwise.
	DefaultQueueLimit = 10_000
)

// config is what a Pool's options make.
type config struct {
	workers    int
	queueLimit int
	noWait     bool
	backoff    worklease.Backoff
	observer   worklease.Observer
	reapAuto   bool          // reap every lease TTL once one is seen, as no WithReapEvery says otherwise
	reapEvery  time.Duration // without reapAuto; 0: never
	errorFunc  func(error)
	clock      clock
	poll       time.Duration // WaitClaim's; 0: worklease.DefaultPoll
	endCalls   int           // the most calls of a kind that end attempts under way at once
	endBatch   int           // the most attempts one such call ends
}

func newConfig(opts []Option) (config, error) {
	c := config{
		workers: DefaultWorkers, queueLimit: DefaultQueueLimit, reapAuto: true, clock: systemClock{},
		endCalls: maxEndCalls, endBatch: maxEndBatch,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	switch {
	case c.workers < 1:
		return config{}, fmt.Errorf("%w: worker: WithWorkers(%d): must be 1 or more", worklease.ErrInvalidConfig, c.workers)
	case c.queueLimit < 0:
		return config{}, fmt.Errorf("%w: worker: WithQueueLimit(%d): must be 0 (no limit) or more", worklease.ErrInvalidConfig, c.queueLimit)
	case c.reapEvery < 0:
		return config{}, fmt.Errorf("%w: worker: WithReapEvery(%v): must be 0 (never) or more", worklease.ErrInvalidConfig, c.reapEvery)
	}
	return c, nil
}

// WithWorkers sets how many handlers the Pool runs at once, each in a
// goroutine of its own: n must be 1 or more. The default is
// DefaultWorkers. The Pool holds n leases at most: a worker's, while its
// handler runs and until the backend has the attempt's end. Since the
// workers that finish together end their jobs in one call, more workers
// make larger batches: with short jobs on a database backend, hundreds of
// workers keep it busy.
func WithWorkers(n int) Option { return optionFunc(func(c *config) { c.workers = n }) }

// WithQueueLimit bounds how many offsets submitted through the Pool may be
// unfinished by it at once: queued, waiting out a retry's delay, or in
// flight. Submit of a new offset beyond the limit waits for room (or
// returns ErrQueueFull, with WithSubmitNoWait): it goes on once an eighth
// of the limit has finished, or, when fewer finish, within 10ms of one
// finishing, so that a producer held back submits in batches. An offset
// submitted again while it is unfinished takes no more room. n of 0 means
// no limit; the default is DefaultQueueLimit. Either way the Pool keeps
// a hash of each offset it counts, some 16 bytes each.
//
// The count is this Pool's view: it counts an offset finished when one of
// its own workers finishes it (succeeds or dead-letters it), or finds it
// finished after losing its lease. With a backend that several processes
// share, an offset this Pool submitted that another process's workers
// finish, or that an operator kills while it is queued, keeps its place in
// the count. Give each process's Pool its own offsets to submit, or a
// limit that leaves room for that.
func WithQueueLimit(n int) Option { return optionFunc(func(c *config) { c.queueLimit = n }) }

// WithSubmitNoWait makes Submit return ErrQueueFull at once when the
// queue limit is reached, rather than wait for room.
func WithSubmitNoWait() Option { return optionFunc(func(c *config) { c.noWait = true }) }

// WithBackoff sets the delays between a failed attempt and the next: an
// attempt that failed is retried after b.Delay(attempt), attempt being the
// failed attempt's number, 1 for the first (so the first retry waits
// 2*b.Base). The default is the zero Backoff: 200ms, then doubling up to a
// minute, with 10% jitter.
func WithBackoff(b worklease.Backoff) Option { return optionFunc(func(c *config) { c.backoff = b }) }

// WithObserver makes the Pool tell o about its jobs: EventStarted as it
// starts a handler, and EventLeaseLost when it finds a lease gone. The
// other events of a job (EventProcessed, EventRetrying, EventDeadLettered,
// ...) are the backend's transitions, which the backend's observer is told
// (worklease.WithObserver): give both the same observer to hear every
// event of a job once. The Pool calls o from its workers' goroutines,
// holding no lock; o must be safe for concurrent use.
func WithObserver(o worklease.Observer) Option { return optionFunc(func(c *config) { c.observer = o }) }

// WithReapEvery makes the Pool call the backend's Reap every d in the
// background while it runs, so that leases that expired (those of a
// crashed process, say) are revoked and their offsets become ready for
// another attempt, or dead letters, even while every worker is busy. (A
// claim takes over leases that are due anyway.) d of 0 turns reaping off.
// By default the Pool reaps once a lease TTL, starting when it first
// claims a lease that expires, and never if leases never expire.
func WithReapEvery(d time.Duration) Option {
	return optionFunc(func(c *config) { c.reapAuto, c.reapEvery = false, d })
}

// WithErrorFunc makes the Pool call f with each error of a backend call it
// made that is no answer about a job: a claim, a renewal, a reap or the end
// of an attempt that failed as a call (a lost connection, say). The Pool
// carries on after each, waiting its backoff before it calls again, except
// after an error matching worklease.ErrClosed, which stops it (Run returns
// the error). Lost leases are not errors: see EventLeaseLost. f is called
// from the Pool's goroutines, holding no lock; it must be safe for
// concurrent use. Stats counts the errors either way.
func WithErrorFunc(f func(error)) Option { return optionFunc(func(c *config) { c.errorFunc = f }) }
