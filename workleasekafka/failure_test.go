package workleasekafka_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease/workleasekafka"
)

// readTopic returns the first n records of topic, from every partition.
func readTopic(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", len(out), n, topic)
		out = append(out, fs.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	return workleasekafka.NewHeaderCarrier(r).Get(key)
}

// A record that fails every attempt goes to the dead-letter topic after its
// retries, with headers that say why, after how many attempts and where it
// came from, and its own; its key carries on, and the partitions are
// committed to their ends. A handler that panics on the last attempt is
// given up on too, its panic the cause.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 2, "orders", "orders.dlq")
	recs := produce(t, brokers, "orders", 300, 10)
	poison := func(r *kgo.Record) bool { return r.Offset%7 == 3 }
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		a := workleasekafka.AttemptFromContext(ctx)
		ok := !poison(r)
		j.end(0, r, a, ok)
		switch {
		case ok:
			return nil
		case r.Offset%2 == 0 && a == 3:
			panic("poisoned " + strconv.FormatInt(r.Offset, 10))
		}
		return errors.New("poisoned " + strconv.FormatInt(r.Offset, 10))
	}, fastBackoff, workleasekafka.WithMaxRetries(2), workleasekafka.WithDeadLetterTopic("orders.dlq"),
		workleasekafka.WithCommitInterval(5*time.Millisecond))

	var good, bad []produced
	for _, r := range recs {
		if r.offset%7 == 3 {
			bad = append(bad, r)
		} else {
			good = append(good, r)
		}
	}
	require.NotEmpty(t, bad)
	j.waitDone(t, good)
	dls := readTopic(t, brokers, "orders.dlq", len(bad))
	closeConsumer(t, c)

	j.checkOrder(t, good, false)
	require.Len(t, dls, len(bad))
	byPlace := map[[2]int64]*kgo.Record{}
	for _, dl := range dls {
		p, err := strconv.ParseInt(header(dl, workleasekafka.HeaderPartition), 10, 32)
		require.NoError(t, err)
		o, err := strconv.ParseInt(header(dl, workleasekafka.HeaderOffset), 10, 64)
		require.NoError(t, err)
		byPlace[[2]int64{p, o}] = dl
	}
	for _, b := range bad {
		dl := byPlace[[2]int64{int64(b.partition), b.offset}]
		require.NotNil(t, dl, "no dead letter for %d/%d", b.partition, b.offset)
		assert.Equal(t, b.key, string(dl.Key))
		assert.Equal(t, b.key+"#"+strconv.Itoa(b.seq), string(dl.Value))
		assert.Equal(t, "orders", header(dl, workleasekafka.HeaderTopic))
		assert.Equal(t, "3", header(dl, workleasekafka.HeaderAttempts))
		cause := header(dl, workleasekafka.HeaderCause)
		if b.offset%2 == 0 {
			assert.Contains(t, cause, "worker: handler panicked: poisoned "+strconv.FormatInt(b.offset, 10))
		} else {
			assert.Equal(t, "poisoned "+strconv.FormatInt(b.offset, 10), cause)
		}
	}
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
	st := c.Stats()
	assert.Equal(t, uint64(len(bad)), st.DeadLettered)
	assert.Equal(t, uint64(len(good)), st.Handled)
}

// Without a dead-letter topic, a record given up on is dropped and
// reported, and its key carries on.
func TestGiveUpWithoutDeadLetterTopic(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	recs := produce(t, brokers, "orders", 20, 2)
	var mu sync.Mutex
	var reported []error
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		j.end(0, r, workleasekafka.AttemptFromContext(ctx), r.Offset != 4)
		if r.Offset == 4 {
			return errBad
		}
		return nil
	}, fastBackoff, workleasekafka.WithMaxRetries(1), workleasekafka.WithErrorFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	j.waitDone(t, append(recs[:4:4], recs[5:]...))
	closeConsumer(t, c)
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reported, 1)
	assert.ErrorIs(t, reported[0], errBad)
	assert.ErrorContains(t, reported[0], "orders/0 offset 4 given up after 2 attempts")
}

var errBad = errors.New("bad record")

// With WithParkOnFailure a record out of retries parks its key: the key's
// later records wait, the other keys carry on, and the partition is not
// committed past the parked record. Resume runs it again, with fresh
// attempts; Skip gives up on it, to the dead-letter topic.
func TestParkResumeSkip(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders", "orders.dlq")
	recs := produce(t, brokers, "orders", 40, 2) // k0 at even offsets, k1 at odd
	var mu sync.Mutex
	healed := false
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		mu.Lock()
		fail := r.Offset == 4 && !healed || r.Offset == 10
		mu.Unlock()
		j.end(0, r, workleasekafka.AttemptFromContext(ctx), !fail)
		if fail {
			return errBad
		}
		return nil
	}, fastBackoff, workleasekafka.WithMaxRetries(1), workleasekafka.WithParkOnFailure(),
		workleasekafka.WithDeadLetterTopic("orders.dlq"), workleasekafka.WithCommitInterval(5*time.Millisecond))

	var k1 []produced
	for _, r := range recs {
		if r.key == "k1" {
			k1 = append(k1, r)
		}
	}
	j.waitDone(t, append(k1, recs[0], recs[2])) // k1's all, k0's up to the parked one
	waitParked := func(offset int64) workleasekafka.ParkedRecord {
		t.Helper()
		for range waitSteps {
			if ps := c.Parked(); len(ps) == 1 && ps[0].Offset == offset {
				return ps[0]
			}
			sleepBriefly()
		}
		t.Fatalf("offset %d never parked: %v", offset, c.Parked())
		return workleasekafka.ParkedRecord{}
	}
	pk := waitParked(4)
	assert.Equal(t, workleasekafka.ParkedRecord{Topic: "orders", Partition: 0, Key: "k0", Offset: 4, Attempts: 2, Cause: errBad}, pk)
	assert.False(t, j.finished(0, 6), "the parked key's next record waits")
	assert.Equal(t, 1, c.Stats().Parked)
	require.ErrorIs(t, c.Resume("orders", 0, "k1"), workleasekafka.ErrNotParked)
	require.ErrorIs(t, c.Resume("orders", 7, "k0"), workleasekafka.ErrNotParked)
	waitCommitted(t, brokers, "g", "orders", 4) // not past the parked record

	mu.Lock()
	healed = true
	mu.Unlock()
	require.NoError(t, c.Resume("orders", 0, "k0"))
	pk = waitParked(10) // 4 ran, then 6 and 8; 10 fails whatever
	assert.Equal(t, 2, pk.Attempts)
	j.mu.Lock()
	var attempts []int
	for _, r := range j.runs["k0"] {
		if r.offset == 4 {
			attempts = append(attempts, r.attempt)
		}
	}
	j.mu.Unlock()
	assert.Equal(t, []int{1, 2, 1}, attempts, "resumed with its attempts counted afresh")

	require.NoError(t, c.Skip("orders", 0, "k0"))
	var rest []produced
	for _, r := range recs {
		if r.offset != 10 {
			rest = append(rest, r)
		}
	}
	j.waitDone(t, rest)
	dls := readTopic(t, brokers, "orders.dlq", 1)
	closeConsumer(t, c)
	assert.Equal(t, "10", header(dls[0], workleasekafka.HeaderOffset))
	assert.Equal(t, "2", header(dls[0], workleasekafka.HeaderAttempts))
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
	assert.Empty(t, c.Parked())
}

// waitSteps and sleepBriefly poll for a state no event announces, up to
// waitFor.
const waitSteps = 12_000

func sleepBriefly() { time.Sleep(10 * time.Millisecond) }

// waitCommitted waits until group has committed partition 0 of topic at
// offset, and fails if it commits past it.
func waitCommitted(t *testing.T, brokers []string, group, topic string, offset int64) {
	t.Helper()
	for range waitSteps {
		got, ok := committed(t, brokers, group, topic)[0]
		require.LessOrEqual(t, got, offset)
		if ok && got == offset {
			return
		}
		sleepBriefly()
	}
	t.Fatalf("partition 0 never committed at %d", offset)
}
