package workleasekafka

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease"
)

// domainOf is the domain tests give the record at offset: one of its
// own, for offsets below 26.
func domainOf(p *partition, offset int64) string { return p.prefix + string(rune('a'+offset%26)) }

// add adds the record at offset, of domain, to p, and says what became
// of it: "lead" (it begins a batch), "joined" (its domain's batch queued),
// "finished" (the commit metadata says so) or "ignored".
func add(p *partition, offset int64, domain string) string {
	n := len(p.pending)
	r := &kgo.Record{Key: []byte(strings.TrimPrefix(domain, p.prefix)), Offset: offset}
	leads, skipped := p.addAll([]*kgo.Record{r}, nil, nil)
	switch {
	case skipped == 1:
		return "finished"
	case len(leads) == 1 && leads[0] == batchLead{domain, offset}:
		return "lead"
	case len(p.pending) > n:
		return "joined"
	}
	return "ignored"
}

// fetch adds the records at offsets, each of its own domain, to p.
func fetch(t *testing.T, p *partition, offsets ...int64) {
	t.Helper()
	for _, o := range offsets {
		require.Equal(t, "lead", add(p, o, domainOf(p, o)))
	}
}

// run starts the batch of domain that begins at offset, and returns the
// offsets of its tasks, and the tasks.
func run(t *testing.T, p *partition, domain string, offset int64) ([]int64, []task) {
	t.Helper()
	_, tasks := p.start(t.Context(), domain, offset, nil)
	var offsets []int64
	for _, tk := range tasks {
		offsets = append(offsets, tk.offset)
	}
	return offsets, tasks
}

// finish runs the batch of one record at offset to its end.
func finish(t *testing.T, p *partition, offset int64) {
	t.Helper()
	d := domainOf(p, offset)
	offsets, tasks := run(t, p, d, offset)
	require.Equal(t, []int64{offset}, offsets)
	dropped, _ := p.finish(d, offset, tasks, 1, false, true)
	require.False(t, dropped)
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
	p := newPartition("t", 0, 1, newBudget(200))
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
	assert.Equal(t, "ignored", add(p, 15, "x"), "fetched again")
}

// The check refuses a commit that would pass an unfinished record or go
// back, whatever the state that computed it.
func TestPartitionCommitCheck(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 3, 1, newBudget(200))
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
	p := newPartition("t", 0, 1, newBudget(200))
	fetch(t, p, 0, 1, 2, 3)
	finish(t, p, 0)
	_, tasks := run(t, p, domainOf(p, 2), 2)
	require.Len(t, tasks, 1)

	drained, _, _ := p.revoke()
	require.NotNil(t, drained, "2 runs")
	offsets, _ := run(t, p, domainOf(p, 1), 1)
	assert.Empty(t, offsets, "dropped")
	assert.Equal(t, "ignored", add(p, 4, "x"))
	dropped, _ := p.finish(domainOf(p, 2), 2, tasks, 1, false, true)
	assert.False(t, dropped)
	select {
	case <-drained:
	default:
		t.Fatal("drained not closed when the last batch ended")
	}
	o, _, ok, err := p.commitPoint(true)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(1), o, "1 was dropped, not finished")
	assert.False(t, p.drainedAll(), "3 is queued still")
	offsets, _ = run(t, p, domainOf(p, 3), 3)
	assert.Empty(t, offsets)
	assert.ElementsMatch(t, []string{domainOf(p, 0), domainOf(p, 1), domainOf(p, 2), domainOf(p, 3)}, p.sweep())
	assert.True(t, p.drainedAll())
}

// Records of a domain fetched while its batch waits join the batch, which
// runs them in order; a batch that stops at a failed record goes on from
// it, even once the records before it are let go of; a batch that stops
// as its partition is revoked drops the records it has left.
func TestPartitionBatches(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1, newBudget(200))
	const d = "t/0/1/k"
	assert.Equal(t, "lead", add(p, 0, d))
	assert.Equal(t, "lead", add(p, 1, "t/0/1/other"))
	assert.Equal(t, "joined", add(p, 2, d))
	assert.Equal(t, "joined", add(p, 3, d))

	offsets, tasks := run(t, p, d, 0)
	require.Equal(t, []int64{0, 2, 3}, offsets)
	assert.Equal(t, 1, tasks[0].attempt)
	assert.Equal(t, "lead", add(p, 4, d), "the batch started: a new one")
	p.finish(d, 0, tasks, 1, true, true) // 2 failed

	o, _, ok, err := p.commitPoint(false)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(1), o)

	offsets, tasks = run(t, p, d, 0) // the Pool's retry: 0 is let go of
	require.Equal(t, []int64{2, 3}, offsets)
	assert.Equal(t, []int{2, 1}, []int{tasks[0].attempt, tasks[1].attempt})
	p.finish(d, 0, tasks, 2, false, true)
	assert.Equal(t, 2, p.unfinished, "1 and 4")

	assert.Equal(t, "joined", add(p, 5, d))
	offsets, tasks = run(t, p, d, 4)
	require.Equal(t, []int64{4, 5}, offsets)
	p.revoke()
	dropped, _ := p.finish(d, 4, tasks, 1, true, false)
	assert.True(t, dropped)
	assert.Equal(t, 1, p.unfinished, "1; 5 dropped")
}

// The commit metadata an assignment begins with skips the records it
// lists, and is carried into the next commit's metadata until they are
// fetched.
func TestPartitionSkip(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1, newBudget(200))
	p.assignedAt(10, []span{{12, 14}, {20, 21}})
	fetch(t, p, 10, 11)
	assert.Equal(t, "finished", add(p, 12, "x"))
	assert.Equal(t, "finished", add(p, 13, "x"))
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
	assert.Equal(t, "finished", add(p, 20, "x"))
	o, meta = commitAt(t, p)
	assert.Equal(t, int64(21), o)
	assert.Empty(t, meta)
}

// Parking, resuming and skipping a record.
func TestPartitionPark(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1, newBudget(200))
	fetch(t, p, 0)
	d := domainOf(p, 0)
	cause := errors.New("bad")
	var tasks []task
	for range 4 {
		_, tasks = run(t, p, d, 0)
		p.finish(d, 0, tasks, 0, true, true)
	}
	assert.Equal(t, 4, tasks[0].attempt)
	require.True(t, p.park(d, 0, "a", cause, 4))
	assert.False(t, p.unpark(p.prefix+"nobody", false))
	require.True(t, p.unpark(d, false))
	_, tasks = run(t, p, d, 0)
	assert.Equal(t, 1, tasks[0].attempt, "attempts counted afresh")
	assert.Nil(t, tasks[0].givenUp)
	p.finish(d, 0, tasks, 0, true, true)
	require.True(t, p.park(d, 0, "a", cause, 1))
	require.True(t, p.unpark(d, true))
	_, tasks = run(t, p, d, 0)
	require.NotNil(t, tasks[0].givenUp)
	assert.Equal(t, cause, tasks[0].givenUp.cause)
	assert.Equal(t, 1, tasks[0].givenUp.failed)
}

// A key's domain is made once in an assignment, and let go of once the
// Manager forgot it, unless a batch of it was queued meanwhile; a key too
// long for a domain is named by its hash.
func TestPartitionKeys(t *testing.T) {
	t.Parallel()
	p := newPartition("t", 0, 1, newBudget(200))
	d := p.prefix + "k"
	require.Equal(t, "lead", add(p, 0, d))
	_, tasks := run(t, p, d, 0)
	require.Equal(t, "lead", add(p, 1, d), "the batch started: a new one")
	p.finish(d, 0, tasks, 1, false, true)
	p.forget([]string{d})
	assert.Len(t, p.keys, 1, "1's batch is queued")
	_, tasks = run(t, p, d, 1)
	p.finish(d, 1, tasks, 1, false, true)
	p.forget([]string{d})
	assert.Empty(t, p.keys)

	long := strings.Repeat("x", worklease.MaxDomainLen)
	leads, _ := p.addAll([]*kgo.Record{{Key: []byte(long), Offset: 2}}, nil, nil)
	require.Len(t, leads, 1)
	sum := sha256.Sum256([]byte(long))
	assert.Equal(t, p.prefix+"#"+hex.EncodeToString(sum[:]), leads[0].domain)
	assert.LessOrEqual(t, len(leads[0].domain), worklease.MaxDomainLen)
	leads, _ = p.addAll([]*kgo.Record{{Key: []byte(long), Offset: 3}}, nil, nil)
	assert.Empty(t, leads, "joined its batch")
}
