package workleaseotel_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/worklease/worklease/workleaseotel"
)

func TestWrapUnwrap(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "produce")
	defer span.End()

	wrapped := workleaseotel.Wrap(ctx, []byte("payload"))
	assert.NotEqual(t, []byte("payload"), wrapped)
	got, payload := workleaseotel.Unwrap(context.Background(), wrapped)
	assert.Equal(t, []byte("payload"), payload)
	sc := trace.SpanContextFromContext(got)
	assert.True(t, sc.IsRemote())
	assert.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
	assert.Equal(t, span.SpanContext().SpanID(), sc.SpanID())
	assert.Equal(t, wrapped, workleaseotel.Wrap(ctx, []byte("payload")), "the same bytes for the same context")

	plain := []byte("no trace")
	assert.Equal(t, &plain[0], &workleaseotel.Wrap(context.Background(), plain)[0], "nothing to carry: the payload itself")
	for _, foreign := range [][]byte{
		nil, {}, []byte("hello"),
		wrapped[:8],  // the magic alone
		wrapped[:12], // cut inside the fields
		append([]byte{0, 'w', 'l', 'o', 't', 'e', 'l', 1}, 0xff),        // a bad count
		append([]byte{0, 'w', 'l', 'o', 't', 'e', 'l', 1}, 1, 200, 'x'), // a length past the end
	} {
		ctx := context.Background()
		got, payload := workleaseotel.Unwrap(ctx, foreign)
		assert.Equal(t, foreign, payload, "%q", foreign)
		assert.False(t, trace.SpanContextFromContext(got).IsValid())
	}
}

func FuzzUnwrap(f *testing.F) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "produce")
	span.End()
	f.Add(workleaseotel.Wrap(ctx, []byte("payload")))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, payload := workleaseotel.Unwrap(context.Background(), b)
		require.True(t, bytes.HasSuffix(b, payload), "the payload is what follows the envelope")
	})
}
