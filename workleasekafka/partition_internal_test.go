package workleasekafka

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetch adds the records at offsets, each of its own domain, to p.
func fetch(t *testing.T, p *partition, offsets ...int64) {
	t.Helper()
	for _, o := range offsets {
		require.Equal(t, added, p.add(&kgo.Record{Offset: o}, p.prefix+string(rune('a'+o%26))))
	}
}

// finish runs the record at offset to its end.
func finish(t *testing.T, p *partition, offset int64) {
	t.Helper()
	_, ok := p.begin(offset, func(error) {})
	require.True(t, ok, "offset %d", offset)
	p.end(offset, true, 100)
}

func commitAt(t *testing.T, p *partition) (int64, string) {
	t.Helper()
	o, meta, ok, err := p.commitPoint(true)
	require.NoError(t, err)
	require.True(t, ok)
	p.committedAt(o, meta)
	return o, meta
}

// A partition commits at its lowest unfinished record, whatever finished
// above it, and past its last record once all are finished; the metadata
// lists what finished above.
func TestPartitionCommitPoint(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1)
	_, _, ok, err := p.commitPoint(true)
	require.NoError(t, err)
	assert.False(t, ok, "nothing fetched")
	fetch(t, p, 10, 11, 12, 14, 15)
	_, _, ok, _ = p.commitPoint(true)
	assert.False(t, ok, "nothing finished, no commit before")

	finish(t, p, 11)
	finish(t, p, 14)
	o, meta := commitAt(t, p)
	assert.Equal(t, int64(10), o)
	assert.Equal(t, []span{{11, 12}, {14, 15}}, decodeMetadata(meta, o))
	_, _, ok, _ = p.commitPoint(true)
	assert.False(t, ok, "nothing moved")

	finish(t, p, 10)
	o, meta = commitAt(t, p)
	assert.Equal(t, int64(12), o)
	assert.Equal(t, []span{{14, 15}}, decodeMetadata(meta, o))

	finish(t, p, 12)
	finish(t, p, 15)
	o, meta = commitAt(t, p)
	assert.Equal(t, int64(16), o)
	assert.Empty(t, meta)
	assert.Equal(t, seen, p.add(&kgo.Record{Offset: 15}, "x"), "fetched again")
}

// The check refuses a commit that would pass an unfinished record or go
// back, whatever the state that computed it.
func TestPartitionCommitCheck(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 3, 1)
	fetch(t, p, 0, 1, 2)
	finish(t, p, 0)
	commitAt(t, p)

	p.mu.Lock()
	p.pending[0].done = true // as if finish had marked 1 done without dropping it
	p.mu.Unlock()
	_, _, _, err := p.commitPoint(false)
	require.ErrorIs(t, err, ErrCommitRefused)

	p.mu.Lock()
	p.pending[0].done = false
	require.NoError(t, p.checkLocked(1))
	assert.ErrorIs(t, p.checkLocked(2), ErrCommitRefused, "passes 1")
	assert.ErrorIs(t, p.checkLocked(0), ErrCommitRefused, "goes back from 1")
	p.unfinished++
	assert.ErrorIs(t, p.checkLocked(1), ErrCommitRefused, "counts disagree")
	p.unfinished--
	p.mu.Unlock()
}

// Records of a revoked partition are dropped as the Pool gets to them,
// unrun; they are not finished, and no commit passes them.
func TestPartitionRevokeDrops(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1)
	fetch(t, p, 0, 1, 2, 3)
	finish(t, p, 0)
	_, ok := p.begin(2, func(error) {})
	require.True(t, ok)

	drained, _, _ := p.revoke()
	require.NotNil(t, drained, "2 runs")
	_, ok = p.begin(1, func(error) {})
	assert.False(t, ok, "dropped")
	assert.Equal(t, forsaken, p.add(&kgo.Record{Offset: 4}, "x"))
	p.end(2, true, 100)
	select {
	case <-drained:
	default:
		t.Fatal("drained not closed when the last handler ended")
	}
	o, _, ok, err := p.commitPoint(true)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(1), o, "1 was dropped, not finished")
	assert.False(t, p.drainedAll(), "3 is queued still")
	_, ok = p.begin(3, func(error) {})
	assert.False(t, ok)
	assert.ElementsMatch(t, []string{p.prefix + "a", p.prefix + "b", p.prefix + "c", p.prefix + "d"}, p.sweep())
	assert.True(t, p.drainedAll())
}

// The commit metadata an assignment begins with skips the records it
// lists, and is carried into the next commit's metadata until they are
// fetched.
func TestPartitionSkip(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1)
	p.assignedAt(10, []span{{12, 14}, {20, 21}})
	fetch(t, p, 10, 11)
	assert.Equal(t, finished, p.add(&kgo.Record{Offset: 12}, "x"))
	assert.Equal(t, finished, p.add(&kgo.Record{Offset: 13}, "x"))
	fetch(t, p, 15)
	finish(t, p, 11)
	o, meta := commitAt(t, p)
	assert.Equal(t, int64(10), o)
	assert.Equal(t, []span{{11, 14}, {20, 21}}, decodeMetadata(meta, o))
	finish(t, p, 10)
	finish(t, p, 15)
	o, meta = commitAt(t, p)
	assert.Equal(t, int64(16), o)
	assert.Equal(t, []span{{20, 21}}, decodeMetadata(meta, o))
	assert.Equal(t, finished, p.add(&kgo.Record{Offset: 20}, "x"))
	o, meta = commitAt(t, p)
	assert.Equal(t, int64(21), o)
	assert.Empty(t, meta)
}

// Parking, resuming and skipping a record.
func TestPartitionPark(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1)
	fetch(t, p, 0)
	d := p.prefix + "a"
	cause := errors.New("bad")
	_, ok := p.begin(0, func(error) {})
	require.True(t, ok)
	require.True(t, p.park(0, "a", 4, cause, 4))
	p.end(0, false, 100)
	_, ok = p.unpark(p.prefix+"nobody", false)
	assert.False(t, ok)
	off, ok := p.unpark(d, false)
	require.True(t, ok)
	assert.Equal(t, int64(0), off)
	s, ok := p.begin(0, func(error) {})
	require.True(t, ok)
	assert.Equal(t, 4, s.base, "attempts counted afresh")
	assert.False(t, s.givenUp)
	require.True(t, p.park(0, "a", 6, cause, 2))
	p.end(0, false, 100)
	_, ok = p.unpark(d, true)
	require.True(t, ok)
	s, ok = p.begin(0, func(error) {})
	require.True(t, ok)
	assert.True(t, s.givenUp)
	assert.Equal(t, cause, s.cause)
	assert.Equal(t, 2, s.attempts)
}
