package workleasekafka

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// records returns records at offsets from to to (not included).
func records(from, to int64) []*kgo.Record {
	var recs []*kgo.Record
	for o := from; o < to; o++ {
		recs = append(recs, &kgo.Record{Offset: o})
	}
	return recs
}

func offsetsOf(recs []*kgo.Record) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Offset)
	}
	return out
}

// done returns a context that is done already.
func done() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// The queue of records polled ahead hands each partition's records over in
// offset order, a part at a time; it has room below its limit; a paused
// partition's records are set aside, neither counted nor handed over,
// until it resumes; a revoked partition's are dropped.
func TestAheadQueue(t *testing.T) {
	t.Parallel()
	b := newBudget(100)
	p1, p2 := newPartition("t", 1, 1, b), newPartition("t", 2, 1, b)
	q := newAheadQueue(10)
	assert.True(t, q.waitRoom(done()), "empty")
	q.push(p1, records(0, 6))
	q.push(p2, records(0, 6))
	q.push(p1, records(6, 8))
	all, aside := q.held()
	assert.Equal(t, [2]int{14, 0}, [2]int{all, aside})
	assert.False(t, q.waitRoom(done()), "no room at the limit")

	p, recs, ok := q.take(done(), 5)
	require.True(t, ok)
	assert.Same(t, p1, p)
	assert.Equal(t, []int64{0, 1, 2, 3, 4}, offsetsOf(recs))
	assert.True(t, q.waitRoom(done()), "room below the limit")

	p1.held.Store(true) // paused
	q.heldChanged()
	all, aside = q.held()
	assert.Equal(t, [2]int{9, 3}, [2]int{all, aside})
	p, recs, ok = q.take(done(), 100)
	require.True(t, ok)
	assert.Same(t, p2, p, "p1's are set aside")
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5}, offsetsOf(recs))
	_, _, ok = q.take(done(), 100)
	assert.False(t, ok, "nothing but p1's")

	p1.held.Store(false) // resumed
	q.heldChanged()
	p, recs, ok = q.take(done(), 100)
	require.True(t, ok)
	assert.Same(t, p1, p)
	assert.Equal(t, []int64{5}, offsetsOf(recs))
	p, recs, ok = q.take(done(), 100)
	require.True(t, ok)
	assert.Same(t, p1, p)
	assert.Equal(t, []int64{6, 7}, offsetsOf(recs))

	q.push(p1, records(8, 10))
	q.push(p2, records(6, 8))
	p1.revoke()
	p, recs, ok = q.take(done(), 100)
	require.True(t, ok)
	assert.Same(t, p2, p, "p1's are dropped")
	assert.Equal(t, []int64{6, 7}, offsetsOf(recs))
	all, _ = q.held()
	assert.Zero(t, all)

	q.push(p2, records(8, 20))
	q.drop([]*partition{p2})
	all, _ = q.held()
	assert.Zero(t, all)
	assert.True(t, q.waitRoom(done()))
}
