package workleaseotel

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/worklease/worklease/worker"
)

// ScopeName is the instrumentation scope of the middleware's tracer and
// meter.
const ScopeName = "github.com/worklease/worklease/workleaseotel"

// The attributes the middleware adds to a span besides the conventions'.
const (
	DomainKey  = attribute.Key("worklease.domain")  // the job's domain
	OffsetKey  = attribute.Key("worklease.offset")  // the job's offset
	AttemptKey = attribute.Key("worklease.attempt") // the attempt's number, 1 for the first
	FenceKey   = attribute.Key("worklease.fence")   // the fence of the lease the attempt runs under
)

// system is messaging.system's value for worklease's jobs, and operation
// messaging.operation.name's.
const (
	system    = "worklease"
	operation = "process"
)

// errorTypePanic is error.type of an attempt whose handler panicked.
const errorTypePanic = "panic"

// A middleware is what Middleware makes its handler of.
type middleware struct {
	cfg      config
	tracer   trace.Tracer
	duration messagingconv.ProcessDuration
	consumed messagingconv.ClientConsumedMessages
	spanName string
	attrs    []attribute.KeyValue // every span's, the job's aside
	// metricAttrs are every measurement's besides messaging.system and
	// messaging.operation.name, which the conventions' instruments add.
	metricAttrs []attribute.KeyValue
}

// Middleware returns a handler that runs h on each attempt inside a span of
// the process operation, with h's job's payload unwrapped (see Wrap and
// Unwrap), and records the attempt's metrics: see the package
// documentation. A panic of h is recorded on the span and in the metrics,
// then goes on to the Pool, which counts it as a failed attempt. It never
// fails: an instrument the meter cannot make is left out.
func Middleware(h worker.Handler, opts ...Option) worker.Handler {
	cfg := newConfig(opts)
	m := &middleware{
		cfg:      cfg,
		tracer:   cfg.tracerProvider.Tracer(ScopeName),
		spanName: operation,
		attrs: []attribute.KeyValue{
			semconv.MessagingSystemKey.String(system),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName(operation),
		},
	}
	if cfg.destination != "" {
		m.spanName += " " + cfg.destination
		dest := semconv.MessagingDestinationName(cfg.destination)
		m.attrs = append(m.attrs, dest)
		m.metricAttrs = []attribute.KeyValue{dest}
	}
	meter := cfg.meterProvider.Meter(ScopeName)
	m.duration, _ = messagingconv.NewProcessDuration(meter) // a noop instrument on error
	m.consumed, _ = messagingconv.NewClientConsumedMessages(meter)
	return func(ctx context.Context, job worker.Job) error { return m.handle(ctx, h, job) }
}

func (m *middleware) handle(ctx context.Context, h worker.Handler, job worker.Job) (err error) {
	var links []trace.Link
	if m.cfg.carrier != nil {
		if c := m.cfg.carrier(ctx, job); c != nil {
			links = m.link(links, m.cfg.propagator.Extract(context.Background(), c))
		}
	}
	if fields, payload, ok := open(job.Payload); ok {
		links = m.link(links, m.cfg.propagator.Extract(context.Background(), fields))
		job.Payload = payload
	}
	attrs := make([]attribute.KeyValue, 0, len(m.attrs)+5)
	attrs = append(attrs, m.attrs...)
	attrs = append(attrs,
		semconv.MessagingMessageID(job.Domain+"/"+strconv.FormatInt(job.Offset, 10)),
		DomainKey.String(job.Domain),
		OffsetKey.Int64(job.Offset),
		AttemptKey.Int(job.Attempt),
		FenceKey.Int64(int64(job.Token.Fence())),
	)
	ctx, span := m.tracer.Start(ctx, m.spanName,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...), trace.WithAttributes(attrs...))
	start := time.Now()
	returned := false
	defer func() {
		var errorType string
		switch {
		case !returned: // a panic, or runtime.Goexit
			errorType = errorTypePanic
			span.SetStatus(codes.Error, "handler panicked or called runtime.Goexit")
			if v := recover(); v != nil {
				span.AddEvent("panic", trace.WithAttributes(attribute.String("panic.value", fmt.Sprint(v))))
				defer panic(v) // on to the Pool, once the span ends
			}
		case err != nil:
			errorType = semconv.ErrorType(err).Value.AsString()
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		if errorType != "" {
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
		}
		span.End()
		m.measure(ctx, time.Since(start), errorType)
	}()
	err = h(ctx, job)
	returned = true
	return err
}

// link appends to links a link to the span context ctx carries, if it is
// valid.
func (m *middleware) link(links []trace.Link, ctx context.Context) []trace.Link {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc})
	}
	return links
}

// measure records an attempt that took d and failed with errorType, or
// succeeded if it is "".
func (m *middleware) measure(ctx context.Context, d time.Duration, errorType string) {
	attrs := m.metricAttrs
	if errorType != "" {
		attrs = append(attrs[:len(attrs):len(attrs)], semconv.ErrorTypeKey.String(errorType))
	}
	m.duration.Record(ctx, d.Seconds(), operation, system, attrs...)
	m.consumed.Add(ctx, 1, operation, system, attrs...)
}
