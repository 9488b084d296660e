package workleaseotel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
	"github.com/worklease/worklease/workleaseotel"
)

// telemetry is an SDK whose spans and metrics the tests read back.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := &telemetry{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tel.spans))
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() {
		ctx := context.Background()
		assert.NoError(t, tel.tp.Shutdown(ctx))
		assert.NoError(t, tel.mp.Shutdown(ctx))
	})
	return tel
}

func (tel *telemetry) opts(more ...workleaseotel.Option) []workleaseotel.Option {
	return append([]workleaseotel.Option{workleaseotel.WithTracerProvider(tel.tp), workleaseotel.WithMeterProvider(tel.mp)}, more...)
}

// processSpans returns the spans the middleware ended, by offset, in the
// order they ended.
func (tel *telemetry) processSpans() map[int64][]tracetest.SpanStub {
	out := map[int64][]tracetest.SpanStub{}
	for _, s := range tel.spans.GetSpans() {
		if s.InstrumentationScope.Name != workleaseotel.ScopeName {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == workleaseotel.OffsetKey {
				out[a.Value.AsInt64()] = append(out[a.Value.AsInt64()], s)
			}
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// runPool runs h, behind the middleware with opts, on the jobs submitted
// by submit, until n attempts have ended, and returns the Pool's counts.
func runPool(t *testing.T, h worker.Handler, n int, submit func(ctx context.Context, p *worker.Pool), opts ...workleaseotel.Option) worker.Stats {
	t.Helper()
	m, err := worklease.New(worklease.WithMaxRetries(1))
	require.NoError(t, err)
	defer m.Close()
	var ended sync.WaitGroup
	ended.Add(n)
	counted := func(ctx context.Context, job worker.Job) error {
		defer ended.Done()
		return h(ctx, job)
	}
	p, err := worker.New(m.Backend(), workleaseotel.Middleware(counted, opts...), worker.WithWorkers(2),
		worker.WithBackoff(worklease.Backoff{Base: time.Microsecond, Max: time.Microsecond}))
	require.NoError(t, err)
	ctx := t.Context()
	submit(ctx, p)
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	ended.Wait()
	require.NoError(t, p.Stop(ctx))
	require.NoError(t, <-done)
	return p.Stats()
}

// Each attempt runs in a consumer span named after the operation and the
// destination, with the messaging conventions' attributes; the handler sees
// the payload as the producer gave it to Wrap, and the span is linked to
// the producer's; a payload Wrap did not make passes unchanged, unlinked.
func TestMiddlewareSpans(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	producer, span := tel.tp.Tracer("producer").Start(context.Background(), "submit")
	span.End()

	var mu sync.Mutex
	seen := map[int64][]string{}
	stats := runPool(t, func(ctx context.Context, job worker.Job) error {
		mu.Lock()
		seen[job.Offset] = append(seen[job.Offset], string(job.Payload))
		mu.Unlock()
		assert.True(t, trace.SpanFromContext(ctx).SpanContext().IsValid(), "the handler runs in the span")
		if job.Offset == 2 && job.Attempt == 1 {
			return errors.New("not yet")
		}
		return nil
	}, 4, func(ctx context.Context, p *worker.Pool) {
		for o, payload := range [][]byte{
			workleaseotel.Wrap(producer, []byte("wrapped")),
			[]byte("plain"),
			workleaseotel.Wrap(producer, nil),
		} {
			_, err := p.Submit(ctx, "tenant-7", int64(o), payload)
			require.NoError(t, err)
		}
	}, tel.opts(workleaseotel.WithDestination("billing"))...)
	assert.Equal(t, uint64(3), stats.Succeeded)

	assert.Equal(t, map[int64][]string{0: {"wrapped"}, 1: {"plain"}, 2: {"", ""}}, seen)
	spans := tel.processSpans()
	require.Len(t, spans[0], 1)
	require.Len(t, spans[1], 1)
	require.Len(t, spans[2], 2)
	for o, ss := range spans {
		for i, s := range ss {
			assert.Equal(t, "process billing", s.Name)
			assert.Equal(t, trace.SpanKindConsumer, s.SpanKind)
			for key, want := range map[attribute.Key]attribute.Value{
				"messaging.system":           attribute.StringValue("worklease"),
				"messaging.operation.type":   attribute.StringValue("process"),
				"messaging.operation.name":   attribute.StringValue("process"),
				"messaging.destination.name": attribute.StringValue("billing"),
				"messaging.message.id":       attribute.StringValue("tenant-7/" + string(rune('0'+o))),
				workleaseotel.DomainKey:      attribute.StringValue("tenant-7"),
				workleaseotel.AttemptKey:     attribute.IntValue(i + 1),
			} {
				got, ok := attr(s, key)
				assert.True(t, ok, "offset %d: %s", o, key)
				assert.Equal(t, want, got, "offset %d: %s", o, key)
			}
			fence, ok := attr(s, workleaseotel.FenceKey)
			assert.True(t, ok)
			assert.Positive(t, fence.AsInt64())
			if o == 1 {
				assert.Empty(t, s.Links, "a plain payload has no producer to link to")
			} else {
				require.Len(t, s.Links, 1)
				assert.Equal(t, span.SpanContext().TraceID(), s.Links[0].SpanContext.TraceID())
				assert.Equal(t, span.SpanContext().SpanID(), s.Links[0].SpanContext.SpanID())
				assert.NotEqual(t, span.SpanContext().TraceID(), s.SpanContext.TraceID(), "linked, not a child")
			}
		}
	}
	failed := spans[2][0]
	assert.Equal(t, codes.Error, failed.Status.Code)
	assert.Equal(t, "not yet", failed.Status.Description)
	et, ok := attr(failed, "error.type")
	assert.True(t, ok)
	assert.Equal(t, "*errors.errorString", et.AsString())
	assert.Equal(t, codes.Unset, spans[2][1].Status.Code)
	_, ok = attr(spans[2][1], "error.type")
	assert.False(t, ok)
}

// A handler that panics fails its attempt: the span says so, and the
// panic goes on to the Pool.
func TestMiddlewarePanic(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	stats := runPool(t, func(ctx context.Context, job worker.Job) error {
		if job.Attempt == 1 {
			panic("boom")
		}
		return nil
	}, 2, func(ctx context.Context, p *worker.Pool) {
		_, err := p.Submit(ctx, "d", 0, nil)
		require.NoError(t, err)
	}, tel.opts()...)
	assert.Equal(t, uint64(1), stats.Panicked)
	assert.Equal(t, uint64(1), stats.Succeeded)
	spans := tel.processSpans()[0]
	require.Len(t, spans, 2)
	assert.Equal(t, "process", spans[0].Name)
	assert.Equal(t, codes.Error, spans[0].Status.Code)
	et, _ := attr(spans[0], "error.type")
	assert.Equal(t, "panic", et.AsString())
	require.Len(t, spans[0].Events, 1)
	assert.Equal(t, "panic", spans[0].Events[0].Name)
	assert.Contains(t, spans[0].Events[0].Attributes, attribute.String("panic.value", "boom"))
}

// Each attempt is counted and timed, failures with their error.type, and
// no measurement carries the domain or the offset.
func TestMiddlewareMetrics(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	runPool(t, func(ctx context.Context, job worker.Job) error {
		if job.Offset%2 == 1 {
			return context.DeadlineExceeded
		}
		return nil
	}, 2+2*2, func(ctx context.Context, p *worker.Pool) { // 4 offsets, the 2 odd ones twice
		for o := range int64(4) {
			_, err := p.Submit(ctx, "d", o, nil)
			require.NoError(t, err)
		}
	}, tel.opts(workleaseotel.WithDestination("q"))...)

	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	byName := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == workleaseotel.ScopeName {
			for _, m := range sm.Metrics {
				byName[m.Name] = m
			}
		}
	}
	hist, ok := byName["messaging.process.duration"].Data.(metricdata.Histogram[float64])
	require.True(t, ok, "the duration histogram")
	assert.Equal(t, "s", byName["messaging.process.duration"].Unit)
	counts := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		et, _ := dp.Attributes.Value("error.type")
		counts[et.AsString()] += dp.Count
		sys, _ := dp.Attributes.Value("messaging.system")
		assert.Equal(t, "worklease", sys.AsString())
		dest, _ := dp.Attributes.Value("messaging.destination.name")
		assert.Equal(t, "q", dest.AsString())
		assert.False(t, dp.Attributes.HasValue("worklease.domain"))
		assert.False(t, dp.Attributes.HasValue("messaging.message.id"))
	}
	assert.Equal(t, map[string]uint64{"": 2, "context.deadlineExceededError": 4}, counts)

	sum, ok := byName["messaging.client.consumed.messages"].Data.(metricdata.Sum[int64])
	require.True(t, ok, "the consumed counter")
	var total int64
	for _, dp := range sum.DataPoints {
		total += dp.Value
	}
	assert.Equal(t, int64(6), total)
}

// WithCarrier links the span to the trace context the carrier holds, as a
// Kafka record's headers do.
func TestMiddlewareCarrier(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	producer, span := tel.tp.Tracer("producer").Start(context.Background(), "produce")
	span.End()
	headers := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(producer, headers)

	runPool(t, func(context.Context, worker.Job) error { return nil }, 1, func(ctx context.Context, p *worker.Pool) {
		_, err := p.Submit(ctx, "d", 0, nil)
		require.NoError(t, err)
	}, tel.opts(workleaseotel.WithCarrier(func(_ context.Context, job worker.Job) propagation.TextMapCarrier {
		if job.Domain != "d" {
			return nil
		}
		return headers
	}))...)
	spans := tel.processSpans()[0]
	require.Len(t, spans, 1)
	require.Len(t, spans[0].Links, 1)
	assert.Equal(t, span.SpanContext().SpanID(), spans[0].Links[0].SpanContext.SpanID())
}
