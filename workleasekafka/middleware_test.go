package workleasekafka_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease/worker"
	"github.com/worklease/worklease/workleasekafka"
)

// Middleware wraps each attempt at each record: it sees the record's
// offset and attempt, reads the record and its headers from the context
// (as a tracing middleware reads trace context), and an error or a panic
// of its own fails the attempt.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t, 1, "orders")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"))
	require.NoError(t, err)
	for i := range 6 {
		r := &kgo.Record{Key: []byte("k"), Value: []byte{byte(i)}}
		workleasekafka.NewHeaderCarrier(r).Set("traceparent", "tp-"+string(rune('a'+i)))
		require.NoError(t, cl.ProduceSync(t.Context(), r).FirstErr())
	}
	cl.Close()

	type seen struct {
		offset      int64
		attempt     int
		traceparent string
	}
	var (
		mu    sync.Mutex
		calls []seen
		outer []string
		done  = make(chan struct{})
	)
	mw := func(name string) func(worker.Handler) worker.Handler {
		return func(h worker.Handler) worker.Handler {
			return func(ctx context.Context, job worker.Job) error {
				mu.Lock()
				outer = append(outer, name)
				mu.Unlock()
				if name == "inner" {
					r := workleasekafka.RecordFromContext(ctx)
					require.NotNil(t, r)
					assert.Equal(t, r.Offset, job.Offset)
					assert.Equal(t, workleasekafka.AttemptFromContext(ctx), job.Attempt)
					mu.Lock()
					calls = append(calls, seen{job.Offset, job.Attempt, workleasekafka.NewHeaderCarrier(r).Get("traceparent")})
					mu.Unlock()
					switch {
					case job.Offset == 2 && job.Attempt == 1:
						return errors.New("the middleware fails this attempt")
					case job.Offset == 4 && job.Attempt == 1:
						panic("the middleware panics")
					}
				}
				return h(ctx, job)
			}
		}
	}
	var handled int
	c := startConsumer(t, clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if handled++; handled == 6 {
			close(done)
		}
		return nil
	}, fastBackoff, workleasekafka.WithMiddleware(mw("outer")), workleasekafka.WithMiddleware(mw("inner")))
	<-done
	closeConsumer(t, c)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []seen{
		{0, 1, "tp-a"}, {1, 1, "tp-b"}, {2, 1, "tp-c"}, {2, 2, "tp-c"}, {3, 1, "tp-d"}, {4, 1, "tp-e"}, {4, 2, "tp-e"}, {5, 1, "tp-f"},
	}, calls)
	for i := 0; i < len(outer); i += 2 {
		assert.Equal(t, []string{"outer", "inner"}, outer[i:i+2], "the first middleware is the outermost")
	}
	st := c.Stats()
	assert.Equal(t, uint64(2), st.Retried)
	assert.Equal(t, uint64(1), st.Panicked)
}

func TestHeaderCarrier(t *testing.T) {
	t.Parallel()
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("3")}}}
	h := workleasekafka.NewHeaderCarrier(r)
	assert.Equal(t, "3", h.Get("a"), "the last of the name")
	assert.Equal(t, "", h.Get("c"))
	assert.Equal(t, []string{"a", "b"}, h.Keys())
	h.Set("a", "4")
	assert.Equal(t, []kgo.RecordHeader{{Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("4")}}, r.Headers)

	none := workleasekafka.NewHeaderCarrier(nil)
	assert.Equal(t, "", none.Get("a"))
	assert.Nil(t, none.Keys())
	none.Set("a", "1") // nothing to write to, and no panic
	assert.Nil(t, workleasekafka.RecordFromContext(context.Background()))
	assert.Zero(t, workleasekafka.AttemptFromContext(context.Background()))
}
