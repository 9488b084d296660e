package workleaseotel

import (
	"bytes"
	"context"
	"encoding/binary"
	"maps"
	"slices"

	"go.opentelemetry.io/otel/propagation"
)

// The envelope Wrap puts around a payload: part of what readers of
// payloads written by other versions read, so never change it; a new
// format gets a new magic.
//
//	magic (8 bytes) | uvarint(pairs) | pairs × (uvarint(len) key, uvarint(len) value) | payload
//
// The pairs are the propagator's fields, such as "traceparent" and
// "tracestate". The magic begins with a zero byte, rare at the start of
// text payloads, and Unwrap also checks that the pairs parse and stay
// within maxFields and maxFieldsLen, so that a payload taken for an
// envelope by mistake is one that also encodes such pairs.
var magic = []byte{0, 'w', 'l', 'o', 't', 'e', 'l', 1}

const (
	maxFields    = 16   // pairs in an envelope, at most
	maxFieldsLen = 8192 // bytes of keys and values in an envelope, at most
)

// Wrap returns payload with the trace context of ctx in front of it, for a
// Pool's Submit or a Backend's Enqueue: Middleware links the span of each
// attempt at the job to that context, and hands the handler payload as it
// is here. If ctx has no trace context to carry (no span, or a propagator
// that writes nothing), Wrap returns payload itself. A nil payload is
// wrapped into an empty one. The only option it reads is WithPropagator.
func Wrap(ctx context.Context, payload []byte, opts ...Option) []byte {
	cfg := newConfig(opts)
	fields := propagation.MapCarrier{}
	cfg.propagator.Inject(ctx, fields)
	if len(fields) == 0 || len(fields) > maxFields {
		return payload
	}
	keys := slices.Sorted(maps.Keys(fields))
	size := len(magic) + binary.MaxVarintLen64
	n := 0
	for _, k := range keys {
		n += len(k) + len(fields[k])
		size += 2*binary.MaxVarintLen64 + len(k) + len(fields[k])
	}
	if n > maxFieldsLen {
		return payload
	}
	out := make([]byte, 0, size+len(payload))
	out = append(out, magic...)
	out = binary.AppendUvarint(out, uint64(len(keys)))
	for _, k := range keys {
		out = binary.AppendUvarint(out, uint64(len(k)))
		out = append(out, k...)
		out = binary.AppendUvarint(out, uint64(len(fields[k])))
		out = append(out, fields[k]...)
	}
	return append(out, payload...)
}

// Unwrap returns the payload that Wrap was given, and ctx with the trace
// context Wrap put in front of it, as a remote span context
// (trace.SpanContextFromContext reads it). A payload that Wrap did not
// make is returned as it is, with ctx. The only option it reads is
// WithPropagator.
func Unwrap(ctx context.Context, payload []byte, opts ...Option) (context.Context, []byte) {
	fields, rest, ok := open(payload)
	if !ok {
		return ctx, payload
	}
	return newConfig(opts).propagator.Extract(ctx, fields), rest
}

// open parses an envelope, and reports false for a payload that is none.
func open(payload []byte) (propagation.MapCarrier, []byte, bool) {
	if !bytes.HasPrefix(payload, magic) {
		return nil, nil, false
	}
	b := payload[len(magic):]
	pairs, n := binary.Uvarint(b)
	if n <= 0 || pairs == 0 || pairs > maxFields {
		return nil, nil, false
	}
	b = b[n:]
	fields := make(propagation.MapCarrier, pairs)
	total := 0
	field := func() (string, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) || total+int(l) > maxFieldsLen {
			return "", false
		}
		s := string(b[n : n+int(l)])
		b = b[n+int(l):]
		total += int(l)
		return s, true
	}
	for range pairs {
		k, ok := field()
		if !ok {
			return nil, nil, false
		}
		v, ok := field()
		if !ok {
			return nil, nil, false
		}
		fields[k] = v
	}
	return fields, b, true
}
