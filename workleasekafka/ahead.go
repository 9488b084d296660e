package workleasekafka

import (
	"context"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// An aheadQueue holds the records the Consumer took from its client ahead
// of its handlers: polled, and not handed to their partitions yet. kgo
// fetches again only once every record of its last fetch was polled, so a
// Consumer that polled only what its handlers may take (see
// WithMaxUnfinished) would leave them idle while kgo fetches; one that
// polls ahead has kgo fetch the next records while the handlers work on
// the last.
//
// The Consumer polls whenever the queue holds fewer than limit records,
// and takes all kgo holds, so that kgo fetches again at once: the queue
// holds fewer than limit records and one poll's more. Records of a
// partition whose fetching is paused for back-pressure (see pauseStuck)
// are set aside: they neither count towards the limit nor are handed over,
// until the partition is resumed. Records of a partition revoked are
// dropped: their next owner fetches them again.
type aheadQueue struct {
	limit int // immutable

	mu sync.Mutex // guards pieces
	// pieces holds the records polled, a run of one partition's a piece,
	// in the order polled; a partition's pieces are in its offsets' order.
	pieces []piece

	ready chan struct{} // holds a wake-up for take: a piece came, or a partition resumed
	room  chan struct{} // holds a wake-up for waitRoom: records were taken, or set aside
}

// A piece is a run of records of one partition, in offset order.
type piece struct {
	p    *partition
	recs []*kgo.Record
}

func newAheadQueue(limit int) *aheadQueue {
	return &aheadQueue{limit: limit, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// wake puts a wake-up in ch unless one is there already.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// heldLocked returns how many records the queue holds, those set aside
// for their paused partition aside. q.mu must be held.
func (q *aheadQueue) heldLocked() int {
	n := 0
	for i := range q.pieces {
		if !q.pieces[i].p.held.Load() {
			n += len(q.pieces[i].recs)
		}
	}
	return n
}

// held returns how many records the queue holds, and how many of them are
// set aside for their paused partition.
func (q *aheadQueue) held() (all, aside int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.pieces {
		all += len(q.pieces[i].recs)
		if q.pieces[i].p.held.Load() {
			aside += len(q.pieces[i].recs)
		}
	}
	return all, aside
}

// waitRoom returns true once the queue holds fewer than its limit, or
// false if ctx ends first.
func (q *aheadQueue) waitRoom(ctx context.Context) bool {
	for {
		q.mu.Lock()
		n := q.heldLocked()
		q.mu.Unlock()
		if n < q.limit {
			return true
		}
		select {
		case <-q.room:
		case <-ctx.Done():
			return false
		}
	}
}

// push adds the records of one poll of p, in offset order, to the queue.
func (q *aheadQueue) push(p *partition, recs []*kgo.Record) {
	if len(recs) == 0 {
		return
	}
	q.mu.Lock()
	q.pieces = append(q.pieces, piece{p, recs})
	q.mu.Unlock()
	wake(q.ready)
}

// take waits for records of a partition neither paused nor revoked and
// returns up to n of them, the partition's first in the queue, taken out
// of it; or ok false if ctx ends first. The pieces of revoked partitions
// it comes across are dropped.
func (q *aheadQueue) take(ctx context.Context, n int) (p *partition, recs []*kgo.Record, ok bool) {
	for {
		q.mu.Lock()
		for i := 0; i < len(q.pieces); {
			pc := &q.pieces[i]
			if pc.p.isRevoked() {
				q.pieces = slices.Delete(q.pieces, i, i+1)
				continue
			}
			if pc.p.held.Load() {
				i++
				continue
			}
			p, recs = pc.p, pc.recs
			if len(recs) > n {
				recs, pc.recs = recs[:n:n], recs[n:]
			} else {
				q.pieces = slices.Delete(q.pieces, i, i+1)
			}
			left := q.heldLocked()
			q.mu.Unlock()
			if left < q.limit {
				wake(q.room)
			}
			return p, recs, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, nil, false
		}
	}
}

// drop drops the pieces of ps, which were revoked.
func (q *aheadQueue) drop(ps []*partition) {
	q.mu.Lock()
	n := len(q.pieces)
	q.pieces = slices.DeleteFunc(q.pieces, func(pc piece) bool { return slices.Contains(ps, pc.p) })
	dropped := len(q.pieces) != n
	q.mu.Unlock()
	if dropped {
		wake(q.room)
	}
}

// heldChanged wakes the queue's waiters after a partition was paused or
// resumed: records were set aside, or come back.
func (q *aheadQueue) heldChanged() {
	wake(q.room)
	wake(q.ready)
}
