package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A partition commits up to its lowest unfinished record, whatever finished
// above it, and past its last polled record once all are finished.
func TestTrackerCommitsBelowLowestUnfinished(t *testing.T) {
	tr := newTracker()
	for i, key := range []string{"a", "b", "a", "c", "b"} {
		add(t, tr, key, 0, int64(10+i))
	}
	add(t, tr, "z", 1, 7)
	assert.Equal(t, map[int32]int64{0: 10, 1: 7}, tr.commitOffsets())

	assert.True(t, tr.finish("b", 11))
	assert.True(t, tr.finish("c", 13))
	assert.Equal(t, int64(10), tr.commitOffsets()[0], "10 is unfinished")
	assert.True(t, tr.finish("a", 10))
	assert.Equal(t, int64(12), tr.commitOffsets()[0], "10 and 11 finished, 12 not")
	assert.False(t, tr.finish("a", 10), "finished already")
	assert.False(t, tr.finish("a", 99), "never polled")
	assert.False(t, tr.finish("nobody", 10), "unknown key")

	n, idle := tr.pending()
	assert.Equal(t, 3, n)
	assert.True(t, tr.finish("a", 12))
	assert.True(t, tr.finish("b", 14))
	assert.Equal(t, int64(15), tr.commitOffsets()[0], "nothing unfinished: one past the last polled")
	assert.True(t, tr.finish("z", 7))
	select {
	case <-idle:
	default:
		t.Fatal("idle not closed when the last record finished")
	}
	n, _ = tr.pending()
	assert.Zero(t, n)
	assert.Equal(t, map[int32]int64{0: 15, 1: 8}, tr.polledTo())
}

func add(t *testing.T, tr *tracker, key string, partition int32, offset int64) {
	t.Helper()
	fresh, err := tr.add(key, partition, offset)
	require.NoError(t, err)
	require.True(t, fresh)
}

// Records polled again after a rebalance are not added again, whether they
// finished or not.
func TestTrackerRedelivery(t *testing.T) {
	tr := newTracker()
	add(t, tr, "a", 0, 5)
	add(t, tr, "b", 0, 6)
	require.True(t, tr.finish("a", 5))
	for _, o := range []int64{5, 6, 3} {
		fresh, err := tr.add("c", 0, o)
		require.NoError(t, err)
		assert.False(t, fresh, "offset %d", o)
	}
	n, _ := tr.pending()
	assert.Equal(t, 1, n)
	assert.False(t, tr.finish("c", 6), "a redelivered record's key is not recorded")
	add(t, tr, "b", 0, 9) // offsets may have gaps
}

func TestTrackerRefusesKeyInTwoPartitions(t *testing.T) {
	tr := newTracker()
	add(t, tr, "a", 0, 5)
	_, err := tr.add("a", 1, 6)
	assert.ErrorContains(t, err, `key "a" is in partitions 0 and 1`)
}
