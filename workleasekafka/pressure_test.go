package workleasekafka_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease/workleasekafka"
)

// With every handler held, the consumer stops polling once it holds
// WithMaxUnfinished records unfinished (at most one poll more); once they
// are let go it polls again, to the partition's end.
func TestBackPressure(t *testing.T) {
	t.Parallel()
	const limit = 20
	brokers := newCluster(t, 1, "orders")
	recs := produce(t, brokers, "orders", 500, 500)
	var mu sync.Mutex
	started := 0
	release := make(chan struct{})
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		started++
		mu.Unlock()
		<-release
		j.begin(r)
		j.end(0, r, 1, true)
		return nil
	}, workleasekafka.WithHandlers(100), workleasekafka.WithMaxUnfinished(limit),
		workleasekafka.WithKeyFunc(func(r *kgo.Record) string { return strconv.FormatInt(r.Offset, 10) }))

	st := waitStats(t, c, func(st workleasekafka.Stats) bool { return st.Throttled })
	assert.GreaterOrEqual(t, st.Unfinished, limit)
	assert.Less(t, st.Unfinished, 2*limit, "past the limit by one poll at most")
	assert.Zero(t, st.Paused, "a partition alone is not paused")
	for range waitSteps { // every record fetched starts: 100 handlers, a key each
		mu.Lock()
		n := started
		mu.Unlock()
		if n == st.Unfinished {
			break
		}
		sleepBriefly()
	}
	mu.Lock()
	assert.Equal(t, st.Unfinished, started, "fetched and unfinished are the records started")
	mu.Unlock()

	close(release)
	j.waitDone(t, recs)
	closeConsumer(t, c)
	j.checkOrder(t, recs, false)
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
}

// A partition whose records do not finish is paused once it holds half of
// WithMaxUnfinished, so that the other partition goes on to its end; once
// they are let go it is fetched again.
func TestBackPressureSlowPartition(t *testing.T) {
	t.Parallel()
	const limit = 40
	brokers := newCluster(t, 2, "orders")
	recs := produce(t, brokers, "orders", 1000, 1000)
	release := make(chan struct{})
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		if r.Partition == 0 {
			<-release
		}
		j.begin(r)
		j.end(0, r, 1, true)
		return nil
	}, workleasekafka.WithHandlers(100), workleasekafka.WithMaxUnfinished(limit),
		workleasekafka.WithKeyFunc(func(r *kgo.Record) string { return strconv.FormatInt(r.Offset, 10) }))

	var fast []produced
	for _, r := range recs {
		if r.partition == 1 {
			fast = append(fast, r)
		}
	}
	j.waitDone(t, fast)
	st := waitStats(t, c, func(st workleasekafka.Stats) bool { return st.Paused == 1 })
	assert.GreaterOrEqual(t, st.Unfinished, limit/2)
	assert.Less(t, st.Unfinished, limit/2+limit)
	close(release)
	j.waitDone(t, recs)
	closeConsumer(t, c)
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
}

// waitStats waits until c's Stats satisfy ok, and returns them.
func waitStats(t *testing.T, c *workleasekafka.Consumer, ok func(workleasekafka.Stats) bool) workleasekafka.Stats {
	t.Helper()
	var st workleasekafka.Stats
	for range waitSteps {
		if st = c.Stats(); ok(st) {
			return st
		}
		sleepBriefly()
	}
	t.Fatalf("never came: %+v", st)
	return st
}

// With WithCommitMetadata, a commit below an unfinished record lists the
// records finished above it, and the partition's next owner skips them:
// only the unfinished record runs again.
func TestCommitMetadataSkipsFinished(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	recs := produce(t, brokers, "orders", 100, 100)
	const stuck = 10
	j := newJournal()
	opts := []workleasekafka.Option{workleasekafka.WithCommitMetadata(), workleasekafka.WithHandlers(8)}
	a, err := workleasekafka.New(clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		if r.Offset == stuck {
			<-ctx.Done() // until the consumer closes
			return ctx.Err()
		}
		j.begin(r)
		j.end(1, r, 1, true)
		return nil
	}, opts...)
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- a.Run(context.Background()) }()
	j.waitDone(t, append(recs[:stuck:stuck], recs[stuck+1:]...))
	closed, cancel := context.WithCancel(context.Background())
	cancel() // the stuck handler is cancelled at once; the rest is committed
	require.ErrorIs(t, a.Close(closed), context.Canceled)
	require.NoError(t, <-ran)
	require.Equal(t, map[int32]int64{0: stuck}, committed(t, brokers, "g", "orders"))

	b := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		j.end(2, r, 1, true)
		return nil
	}, append(opts, workleasekafka.WithCommitInterval(5*time.Millisecond))...)
	j.waitDone(t, recs)
	closeConsumer(t, b)
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
	j.checkOrder(t, recs, false)
	assert.Equal(t, uint64(len(recs)-stuck-1), b.Stats().Skipped)
	assert.Equal(t, uint64(1), b.Stats().Handled)
}

// With every handler held, the consumer polls records ahead of its
// handlers, so that the client fetches the next while they work, until it
// holds WithMaxUnfinished of them ahead (one poll more at most, here one
// record batch of a fetch); then it polls no more until they are handed
// over, and once the handlers are let go it goes on to the partition's
// end.
func TestPollAheadBounded(t *testing.T) {
	t.Parallel()
	const limit, batches, perBatch = 20, 50, 10
	brokers := newCluster(t, 1, "orders")
	var recs []produced
	for range batches { // each call a batch or a few: a fetch brings one
		recs = append(recs, produce(t, brokers, "orders", perBatch, perBatch)...)
	}
	release := make(chan struct{})
	j := newJournal()
	c := startConsumer(t, append(clientOpts(brokers, "g", "orders"), kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1)),
		func(ctx context.Context, r *kgo.Record) error {
			<-release
			j.begin(r)
			j.end(0, r, 1, true)
			return nil
		}, workleasekafka.WithHandlers(100), workleasekafka.WithMaxUnfinished(limit))

	st := waitStats(t, c, func(st workleasekafka.Stats) bool { return st.Throttled && st.Ahead >= limit })
	assert.Less(t, st.Ahead, limit+perBatch, "past the limit by one poll at most")
	assert.Zero(t, st.AheadPaused)
	assert.Less(t, st.Unfinished, 2*limit)
	assert.Less(t, st.Unfinished+st.Ahead, len(recs), "polled them all")
	sleepBriefly() // fetches may come: none is polled
	assert.Equal(t, st.Ahead, c.Stats().Ahead)

	close(release)
	j.waitDone(t, recs)
	closeConsumer(t, c)
	st = c.Stats()
	assert.Zero(t, st.Ahead)
	assert.Equal(t, uint64(len(recs)), st.Handled)
	j.checkOrder(t, recs, false)
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
}
