package workleasekafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease/workleasekafka"
)

// startConsumer makes a Consumer and runs it until the test closes it,
// which it must (cleanup closes it too, and fails if Run failed).
func startConsumer(t *testing.T, copts []kgo.Opt, h workleasekafka.Handler, opts ...workleasekafka.Option) *workleasekafka.Consumer {
	t.Helper()
	c, err := workleasekafka.New(copts, h, opts...)
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		assert.NoError(t, c.Close(ctx))
		assert.NoError(t, <-ran)
	})
	return c
}

// closeConsumer closes c, which must close cleanly.
func closeConsumer(t *testing.T, c *workleasekafka.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, c.Close(ctx))
}

// One consumer, many keys over four partitions, more handlers than
// partitions: every record runs once, each key's in order, and the group
// is committed to the end of every partition once the consumer closes.
func TestConsume(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 4, "orders")
	recs := produce(t, brokers, "orders", 2000, 50)
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		j.end(0, r, workleasekafka.AttemptFromContext(ctx), true)
		return nil
	}, workleasekafka.WithHandlers(16), workleasekafka.WithCommitInterval(5*time.Millisecond))
	j.waitDone(t, recs)
	closeConsumer(t, c)

	j.checkOrder(t, recs, false)
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
	st := c.Stats()
	assert.Equal(t, uint64(len(recs)), st.Handled)
	assert.Positive(t, st.Commits)
	assert.Zero(t, st.Unfinished)
}

// A handler that fails is retried, before the key's next record; the
// attempt number counts up from 1, and is 1 again for the records that a
// retried batch runs after the one it was retried for.
func TestRetries(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 2, "orders")
	recs := produce(t, brokers, "orders", 200, 10)
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		a := workleasekafka.AttemptFromContext(ctx)
		ok := r.Offset%3 != 0 || a == 3 // every third record fails twice
		j.end(0, r, a, ok)
		if !ok {
			return errors.New("not yet")
		}
		return nil
	}, fastBackoff, workleasekafka.WithMaxRetries(2))
	j.waitDone(t, recs)
	closeConsumer(t, c)

	j.checkOrder(t, recs, false)
	j.mu.Lock()
	defer j.mu.Unlock()
	for key, runs := range j.runs {
		for i, r := range runs {
			want := 1
			if i > 0 && runs[i-1].offset == r.offset {
				want = runs[i-1].attempt + 1
			}
			assert.Equal(t, want, r.attempt, "key %s offset %d", key, r.offset)
		}
	}
	st := c.Stats()
	assert.Equal(t, uint64(len(recs)), st.Handled)
	var failing uint64
	for _, r := range recs {
		if r.offset%3 == 0 {
			failing++
		}
	}
	assert.Equal(t, 2*failing, st.Retried)
	assert.Zero(t, st.DeadLettered)
}

// A handler that panics fails its attempt, which is retried.
func TestPanicIsFailedAttempt(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	recs := produce(t, brokers, "orders", 20, 2)
	j := newJournal()
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		a := workleasekafka.AttemptFromContext(ctx)
		j.end(0, r, a, a > 1)
		if a == 1 {
			panic("boom")
		}
		return nil
	}, fastBackoff)
	j.waitDone(t, recs)
	closeConsumer(t, c)
	j.checkOrder(t, recs, false)
	st := c.Stats()
	assert.Equal(t, uint64(len(recs)), st.Panicked)
	assert.Equal(t, uint64(len(recs)), st.Retried)
	assert.Equal(t, ends(recs), committed(t, brokers, "g", "orders"))
}

// Options out of range, and client options without a group, are refused
// with an error matching worklease.ErrInvalidConfig, never a panic.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	ok := clientOpts(brokers, "g", "orders")
	h := func(context.Context, *kgo.Record) error { return nil }
	for _, tc := range []struct {
		name  string
		copts []kgo.Opt
		h     workleasekafka.Handler
		opts  []workleasekafka.Option
	}{
		{"no handler", ok, nil, nil},
		{"no group", []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("orders")}, h, nil},
		{"bad client option", append(ok[:len(ok):len(ok)], kgo.ClientID(strings.Repeat("x", 300))), h, nil},
		{"handlers", ok, h, []workleasekafka.Option{workleasekafka.WithHandlers(0)}},
		{"retries", ok, h, []workleasekafka.Option{workleasekafka.WithMaxRetries(-1)}},
		{"commit interval", ok, h, []workleasekafka.Option{workleasekafka.WithCommitInterval(0)}},
		{"revoke timeout", ok, h, []workleasekafka.Option{workleasekafka.WithRevokeTimeout(-time.Second)}},
		{"max unfinished", ok, h, []workleasekafka.Option{workleasekafka.WithMaxUnfinished(0)}},
		{"dead-letter topic", ok, h, []workleasekafka.Option{workleasekafka.WithDeadLetterTopic("no/slash")}},
		{"dead-letter topic dot", ok, h, []workleasekafka.Option{workleasekafka.WithDeadLetterTopic("..")}},
		{"nil middleware", ok, h, []workleasekafka.Option{workleasekafka.WithMiddleware(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := workleasekafka.New(tc.copts, tc.h, tc.opts...)
			require.ErrorIs(t, err, errInvalidConfig)
			require.Nil(t, c)
		})
	}
}

// Close without Run closes the client; Run after Close refuses.
func TestCloseWithoutRun(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	c, err := workleasekafka.New(clientOpts(brokers, "g", "orders"), func(context.Context, *kgo.Record) error { return nil })
	require.NoError(t, err)
	require.NoError(t, c.Close(context.Background()))
	require.NoError(t, c.Close(context.Background()))
	require.ErrorIs(t, c.Run(context.Background()), workleasekafka.ErrClosed)
}

// Run's context ending stops the consumer: handlers are cancelled with
// ErrStopped, the records they ran are not committed, and Run returns the
// context's error.
func TestRunContextEnds(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	produce(t, brokers, "orders", 10, 1)
	started := make(chan struct{})
	var once sync.Once
	var cause error
	c, err := workleasekafka.New(clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	<-started
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	require.ErrorIs(t, cause, workleasekafka.ErrStopped)
	require.NoError(t, c.Close(context.Background()))
	assert.Empty(t, committed(t, brokers, "g", "orders"), "nothing finished, nothing committed")
	require.ErrorIs(t, c.Run(context.Background()), workleasekafka.ErrClosed)
}

// WithCommitCheck sees every offset before it is committed, and an error
// keeps the partition out of the commit, reported as refused.
func TestCommitCheck(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 2, "orders")
	recs := produce(t, brokers, "orders", 200, 20)
	j := newJournal()
	var mu sync.Mutex
	seen := map[int32][]int64{}
	var refused []error
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		j.begin(r)
		j.end(0, r, 1, true)
		return nil
	}, workleasekafka.WithCommitInterval(5*time.Millisecond),
		workleasekafka.WithCommitCheck(func(topic string, partition int32, offset int64) error {
			mu.Lock()
			defer mu.Unlock()
			seen[partition] = append(seen[partition], offset)
			for _, r := range recs {
				if r.partition == partition && r.offset < offset && !j.finished(r.partition, r.offset) {
					return fmt.Errorf("%s/%d at %d passes %d", topic, partition, offset, r.offset)
				}
			}
			if partition == 1 {
				return errBad
			}
			return nil
		}), workleasekafka.WithErrorFunc(func(err error) {
			mu.Lock()
			defer mu.Unlock()
			refused = append(refused, err)
		}))
	j.waitDone(t, recs)
	closeConsumer(t, c)

	got := committed(t, brokers, "g", "orders")
	assert.Equal(t, ends(recs)[0], got[0])
	assert.NotContains(t, got, int32(1), "the check refused every commit of partition 1")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, refused)
	for _, err := range refused {
		require.ErrorIs(t, err, workleasekafka.ErrCommitRefused)
		require.ErrorIs(t, err, errBad, "only partition 1's commits are refused")
	}
	for p, offs := range seen {
		assert.IsNonDecreasing(t, offs, "partition %d", p)
	}
}

// Keys of any bytes work: none, with slashes, not UTF-8, and longer than
// a domain may be (they are hashed); records without a key share one.
func TestOddKeys(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"))
	require.NoError(t, err)
	keys := [][]byte{nil, []byte("a/b/c"), {0, 0xff, '/'}, []byte(strings.Repeat("long", 2000))}
	for i := range 20 {
		r := &kgo.Record{Key: keys[i%len(keys)], Value: []byte(strconv.Itoa(i))}
		require.NoError(t, cl.ProduceSync(t.Context(), r).FirstErr())
	}
	cl.Close()
	var mu sync.Mutex
	got := map[string][]int{}
	var errs []error
	done := make(chan struct{})
	n := 0
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		v, err := strconv.Atoi(string(r.Value))
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		got[string(r.Key)] = append(got[string(r.Key)], v)
		if n++; n == 20 {
			close(done)
		}
		return nil
	}, workleasekafka.WithErrorFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}))
	<-done
	closeConsumer(t, c)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, errs)
	for k, key := range keys {
		assert.Equal(t, []int{k, k + 4, k + 8, k + 12, k + 16}, got[string(key)], "key %d", k)
	}
}
