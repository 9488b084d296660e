// Package workleaseotel traces and measures the jobs of a worklease
// worker.Pool with OpenTelemetry, following its messaging semantic
// conventions.
//
// [Middleware] wraps a worker.Handler: each attempt runs in a span of kind
// consumer named "process" (or "process <destination>", with
// [WithDestination]), with messaging.system "worklease",
// messaging.operation.type and messaging.operation.name "process",
// messaging.message.id "<domain>/<offset>", and the attributes
// worklease.domain, worklease.offset, worklease.attempt and worklease.fence;
// a failed attempt (an error or a panic) sets the span's status to Error
// and its error.type attribute. Each attempt is also counted in the
// messaging.client.consumed.messages counter and timed in the
// messaging.process.duration histogram, in seconds, with error.type on
// failures; their attributes leave out the domain and the offset, whose
// number has no bound.
//
// # Trace context from the producer
//
// The process span is linked to the span that submitted the job, as the
// conventions advise for a message processed apart from its sender. The
// core module's calls carry no metadata besides a payload, so the trace
// context travels inside it: [Wrap] puts the submitting context's trace
// context in front of a payload, and the middleware takes it off again, so
// that the handler sees the payload as it was given to Wrap. A payload that
// Wrap did not make (from a producer that does not trace, or from before
// tracing began) reaches the handler unchanged, and its span has no link.
// The price is a few dozen bytes per payload, and that every reader of the
// payloads, other than the handler behind the middleware, must [Unwrap]
// them. A Backend that keeps no payloads (the Manager with a journal)
// carries no trace context.
//
// Messages that carry trace context elsewhere, such as Kafka records in
// their headers, give it to the middleware with [WithCarrier]: the
// workleasekafka module's Consumer runs the middleware on each record (its
// WithMiddleware option) with the record in the context, and its
// HeaderCarrier reads the record's headers.
//
// # Concurrency
//
// The middleware and Wrap are safe for concurrent use, and start no
// goroutine.
package workleaseotel
