package workleaseotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/worklease/worklease/worker"
)

// An Option configures Middleware, Wrap or Unwrap; each takes the options
// that concern it and ignores the others.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagator     propagation.TextMapPropagator
	destination    string
	carrier        func(context.Context, worker.Job) propagation.TextMapCarrier
}

func newConfig(opts []Option) config {
	c := config{propagator: propagation.TraceContext{}}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.propagator == nil {
		c.propagator = propagation.TraceContext{}
	}
	return c
}

// WithTracerProvider makes the middleware start its spans with tp's
// tracer. The default is the global provider (otel.GetTracerProvider) at
// the time Middleware is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tracerProvider = tp })
}

// WithMeterProvider makes the middleware record its metrics with mp's
// meter. The default is the global provider (otel.GetMeterProvider) at the
// time Middleware is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.meterProvider = mp })
}

// WithPropagator sets how trace context is written into payloads (Wrap)
// and read from them and from carriers (Unwrap, Middleware). The default is
// W3C Trace Context (propagation.TraceContext), which most producers write,
// Kafka's included; the global propagator is not the default, as it is a
// no-op until an application sets one. A nil p means the default.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return optionFunc(func(c *config) { c.propagator = p })
}

// WithDestination names what the jobs were taken from, such as a queue or
// a topic, as messaging.destination.name on spans and metrics, and in the
// span's name ("process <name>"). It should be a name of few values, as the
// metrics' attributes: not the domain. None by default.
func WithDestination(name string) Option {
	return optionFunc(func(c *config) { c.destination = name })
}

// WithCarrier makes the middleware read, besides the payload, a trace
// context from what f returns for each attempt (nil for none), and link the
// attempt's span to it too. It is for messages that carry trace context
// outside the payload; for records of the workleasekafka module's Consumer:
//
//	workleasekafka.WithMiddleware(func(h worker.Handler) worker.Handler {
//		return workleaseotel.Middleware(h, workleaseotel.WithCarrier(
//			func(ctx context.Context, _ worker.Job) propagation.TextMapCarrier {
//				return workleasekafka.NewHeaderCarrier(workleasekafka.RecordFromContext(ctx))
//			}))
//	})
func WithCarrier(f func(ctx context.Context, job worker.Job) propagation.TextMapCarrier) Option {
	return optionFunc(func(c *config) { c.carrier = f })
}
