package workleaseotel_test

import (
	"context"
	"fmt"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
	"github.com/worklease/worklease/workleaseotel"
)

// The producer wraps the payload with its trace context; the Pool's
// handler, behind the middleware, runs in a process span linked to the
// producer's, and sees the payload as it was.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	m, err := worklease.New()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	var handled sync.WaitGroup // for the example's sake: a service runs on
	handled.Add(1)
	p, err := worker.New(m.Backend(), workleaseotel.Middleware(func(ctx context.Context, job worker.Job) error {
		defer handled.Done()
		fmt.Printf("handled %s/%d: %s\n", job.Domain, job.Offset, job.Payload)
		return nil
	}, workleaseotel.WithTracerProvider(tp), workleaseotel.WithDestination("invoices")))
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	producer, span := tp.Tracer("shop").Start(ctx, "checkout")
	if _, err := p.Submit(ctx, "tenant-7", 42, workleaseotel.Wrap(producer, []byte("invoice #1"))); err != nil {
		panic(err)
	}
	span.End()

	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	handled.Wait()
	if err := p.Stop(ctx); err != nil {
		panic(err)
	}
	if err := <-done; err != nil {
		panic(err)
	}

	for _, s := range spans.GetSpans() {
		if s.Name == "checkout" {
			continue
		}
		linked := len(s.Links) == 1 && s.Links[0].SpanContext.SpanID() == span.SpanContext().SpanID()
		fmt.Printf("span %q, kind %v, linked to the checkout: %v\n", s.Name, s.SpanKind, linked)
	}
	// Output:
	// handled tenant-7/42: invoice #1
	// span "process invoices", kind consumer, linked to the checkout: true
}
