package worker

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// A queue counts the offsets submitted through a Pool that it has not
// finished, and holds Submit back at its limit (see WithQueueLimit). It
// keeps each such offset's key, so that an offset submitted again while
// it is unfinished takes no more room, and so that only a worker that
// finishes a key it holds frees room: a key present is one slot taken.
//
// A Submit that waits at the limit is woken once the count is down to low,
// an eighth of the limit below it (one, for a limit under 16), or, if that
// takes longer, after
// recheckEvery: a producer held back then runs in batches, as it would
// behind a channel's buffer, rather than once for each offset that
// finishes, which cost the workers a tenth of their throughput when each
// job's wake-up came between their timers (BenchmarkPoolThroughput).
type queue struct {
	limit int64 // 0: none
	low   int64 // the count at which a waiting Submit is woken
	seed  maphash.Seed
	wake  chan struct{} // holds one wake-up for the waiting Submits

	// The counts, written by every Submit and every finished offset, each
	// on a cache line of its own, away from the settings above.
	_       [64]byte
	n       atomic.Int64 // slots taken: keys held
	_       [56]byte
	waiting atomic.Int32 // Submits waiting for room
	_       [60]byte

	shards [queueShards]queueShard
}

// recheckEvery is how long a Submit waits at most at the limit before it
// looks for room again, when too few offsets finish to wake it.
const recheckEvery = 10 * time.Millisecond

const queueShards = 32

type queueShard struct {
	mu   sync.Mutex // guards keys
	keys keySet
	_    [24]byte // keeps each shard's lock on a cache line of its own
}

// A queueKey names an offset of a domain.
type queueKey struct {
	domain string
	offset int64
}

// hash returns k's hash, which stands for k in the queue: two keys of the
// same hash among the queue's (one chance in 2^64 for each pair) would
// count as one offset. It is never 0, which a keySet holds for none.
func (q *queue) hash(k queueKey) uint64 {
	h := maphash.String(q.seed, k.domain) ^ uint64(k.offset)*0x9e3779b97f4a7c15 // Fibonacci hashing's multiplier
	return max(h, 1)
}

func newQueue(limit int) *queue {
	return &queue{limit: int64(limit), low: int64(limit - max(1, limit/8)), seed: maphash.MakeSeed(), wake: make(chan struct{}, 1)}
}

func (q *queue) shard(h uint64) *queueShard { return &q.shards[h>>59] } // queueShards = 2^5

// add takes a slot for k unless k holds one already, waiting for room at
// the limit unless noWait (then it returns ErrQueueFull), until ctx ends
// (its error) or stopped is closed (ErrStopped). It reports whether it
// took the slot, which the caller then gives back with done(k) if the
// backend did not queue k after all.
func (q *queue) add(ctx context.Context, k queueKey, noWait bool, stopped <-chan struct{}) (bool, error) {
	h := q.hash(k)
	sh := q.shard(h)
	sh.mu.Lock()
	held := sh.keys.has(h)
	took := !held && q.tryTake()
	if took {
		sh.keys.add(h)
	}
	sh.mu.Unlock()
	if held || took {
		return took, nil
	}
	if err := q.take(ctx, noWait, stopped); err != nil {
		return false, err
	}
	sh.mu.Lock()
	held = !sh.keys.add(h)
	sh.mu.Unlock()
	if held { // another Submit of k took a slot for it meanwhile
		q.free()
		return false, nil
	}
	return true, nil
}

// done gives back k's slot, if k holds one: its offset is finished, or
// was never queued.
func (q *queue) done(k queueKey) {
	h := q.hash(k)
	sh := q.shard(h)
	sh.mu.Lock()
	held := sh.keys.remove(h)
	sh.mu.Unlock()
	if held {
		q.free()
	}
}

// holds reports whether k holds a slot.
func (q *queue) holds(k queueKey) bool {
	h := q.hash(k)
	sh := q.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.keys.has(h)
}

// take takes a slot, waiting for room as add says.
func (q *queue) take(ctx context.Context, noWait bool, stopped <-chan struct{}) error {
	var recheck *time.Timer
	defer func() {
		if recheck != nil {
			recheck.Stop()
		}
	}()
	for {
		if q.tryTake() {
			return nil
		}
		if noWait {
			return ErrQueueFull
		}
		// Registered as waiting before looking again, so that a slot freed
		// after the look wakes this wait: free reads waiting after it
		// gives the slot back (both sequentially consistent).
		q.waiting.Add(1)
		if q.tryTake() {
			q.waiting.Add(-1)
			q.passOn()
			return nil
		}
		if recheck == nil {
			recheck = time.NewTimer(recheckEvery)
		} else {
			recheck.Reset(recheckEvery)
		}
		var err error
		select {
		case <-q.wake:
		case <-recheck.C:
		case <-ctx.Done():
			err = ctx.Err()
		case <-stopped:
			err = ErrStopped
		}
		q.waiting.Add(-1)
		if err != nil {
			q.passOn() // the wake-up it may have taken
			return err
		}
		if q.tryTake() {
			q.passOn()
			return nil
		}
	}
}

// passOn wakes the next waiting Submit if there is room for it.
func (q *queue) passOn() {
	if q.waiting.Load() > 0 && (q.limit == 0 || q.n.Load() < q.limit) {
		q.signal()
	}
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default: // one is pending already
	}
}

func (q *queue) tryTake() bool {
	if q.limit == 0 {
		q.n.Add(1)
		return true
	}
	for {
		n := q.n.Load()
		if n >= q.limit {
			return false
		}
		if q.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// free gives a slot back, and wakes a waiting Submit once the count is
// down to low.
func (q *queue) free() {
	if n := q.n.Add(-1); n <= q.low && q.waiting.Load() > 0 {
		q.signal()
	}
}
