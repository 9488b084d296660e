package workleasekafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease/workleasekafka"
)

// When a partition is revoked, a handler that runs past WithRevokeTimeout
// is cancelled with ErrRevoked; the consumer starts none of the
// partition's records after that, commits nothing past the unfinished one,
// and the partition's new owner runs them all.
func TestRevokeTimeout(t *testing.T) {
	t.Parallel()
	brokers, j, commits := watchedCluster(t, 2, "orders")
	recs := produce(t, brokers, "orders", 40, 8)
	commits.produced(recs)

	// a never finishes a record: every handler waits for its context.
	var (
		mu      sync.Mutex
		started = map[int32]int{}  // records a started, by partition
		revoked = map[int32]bool{} // partitions whose handler was cancelled with ErrRevoked
		late    []string           // starts after the partition's handler was revoked
		moved   = make(chan int32, 2)
	)
	a, err := workleasekafka.New(clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		if revoked[r.Partition] {
			late = append(late, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
		}
		started[r.Partition]++
		mu.Unlock()
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), workleasekafka.ErrRevoked) {
			mu.Lock()
			if !revoked[r.Partition] {
				revoked[r.Partition] = true
				moved <- r.Partition
			}
			mu.Unlock()
		}
		return ctx.Err()
	}, fastBackoff, workleasekafka.WithRevokeTimeout(100*time.Millisecond), workleasekafka.WithCommitInterval(5*time.Millisecond))
	require.NoError(t, err)
	aRan := make(chan error, 1)
	go func() { aRan <- a.Run(context.Background()) }()
	for range waitSteps { // a runs a record of each partition
		mu.Lock()
		both := started[0] > 0 && started[1] > 0
		mu.Unlock()
		if both {
			break
		}
		sleepBriefly()
	}

	b := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		j.end(2, r, workleasekafka.AttemptFromContext(ctx), true)
		return nil
	}, workleasekafka.WithCommitInterval(5*time.Millisecond))
	var p int32
	select {
	case p = <-moved:
	case <-time.After(waitFor):
		t.Fatal("no partition was revoked from a")
	}
	var mine []produced
	for _, r := range recs {
		if r.partition == p {
			mine = append(mine, r)
		}
	}
	j.waitDone(t, mine) // b runs them all, from the first
	closeConsumer(t, b)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.Close(gone), context.Canceled)
	require.NoError(t, <-aRan)

	mu.Lock()
	assert.Empty(t, late, "a started records of a partition it no longer owned")
	mu.Unlock()
	commits.mu.Lock()
	assert.Empty(t, commits.violations)
	commits.mu.Unlock()
	assert.Equal(t, ends(mine)[p], committed(t, brokers, "g", "orders")[p])
}

// Records polled ahead of the handlers belong to the assignment they were
// polled in: when their partition is revoked the consumer drops them
// unrun, no commit passes them, and the partition's new owner runs them;
// when the partition comes back, the consumer starts where the group's
// commit is, and never runs what it had polled before.
func TestRevokeDropsRecordsAhead(t *testing.T) {
	t.Parallel()
	const limit = 4
	brokers, j, commits := watchedCluster(t, 2, "orders")
	recs := produce(t, brokers, "orders", 400, 40)
	commits.produced(recs)

	// a holds its handlers until the end, but for those of a partition
	// revoked, which are cancelled.
	var (
		mu      sync.Mutex
		movedTo = map[int32]bool{} // partitions b ran a record of
		late    []string           // starts by a of a partition b ran a record of
		moved   = make(chan int32, 2)
		release = make(chan struct{})
	)
	a, err := workleasekafka.New(clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		if movedTo[r.Partition] {
			late = append(late, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
		}
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		j.begin(r)
		j.end(1, r, workleasekafka.AttemptFromContext(ctx), true)
		return nil
	}, fastBackoff, workleasekafka.WithMaxUnfinished(limit), workleasekafka.WithHandlers(8),
		workleasekafka.WithRevokeTimeout(50*time.Millisecond), workleasekafka.WithCommitInterval(5*time.Millisecond))
	require.NoError(t, err)
	aRan := make(chan error, 1)
	go func() { aRan <- a.Run(context.Background()) }()
	st := waitStats(t, a, func(st workleasekafka.Stats) bool {
		return st.Partitions == 2 && st.Throttled && st.Ahead >= limit
	})
	require.Less(t, st.Unfinished+st.Ahead, len(recs)+1)
	t.Logf("a holds %d records unfinished and %d ahead", st.Unfinished, st.Ahead)

	b, err := workleasekafka.New(clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		if !movedTo[r.Partition] {
			movedTo[r.Partition] = true
			moved <- r.Partition
		}
		mu.Unlock()
		j.begin(r)
		j.end(2, r, workleasekafka.AttemptFromContext(ctx), true)
		return nil
	}, workleasekafka.WithCommitInterval(5*time.Millisecond))
	require.NoError(t, err)
	bRan := make(chan error, 1)
	go func() { bRan <- b.Run(context.Background()) }()
	var p int32
	select {
	case p = <-moved:
	case <-time.After(waitFor):
		t.Fatal("no partition moved to b")
	}
	var mine []produced
	for _, r := range recs {
		if r.partition == p {
			mine = append(mine, r)
		}
	}
	j.waitDone(t, mine) // b runs them all, from the first
	st = a.Stats()
	assert.Equal(t, 1, st.Partitions)
	assert.LessOrEqual(t, st.Ahead, len(recs)-len(mine), "a holds the other partition's records ahead only")

	closeConsumer(t, b) // the partition goes back to a, at b's commit: its end
	require.NoError(t, <-bRan)
	waitStats(t, a, func(st workleasekafka.Stats) bool { return st.Partitions == 2 })
	close(release)
	j.waitDone(t, recs)
	closeConsumer(t, a)
	require.NoError(t, <-aRan)

	mu.Lock()
	assert.Empty(t, late, "a started records of a partition after it moved")
	mu.Unlock()
	commits.mu.Lock()
	assert.Empty(t, commits.violations)
	commits.mu.Unlock()
	j.checkOrder(t, recs, false) // each ran to success once
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
}
