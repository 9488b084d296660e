// Package workleaseprom exports the events of a worklease backend and a
// worker pool as Prometheus metrics.
//
// A [Collector] is both a [worklease.Observer] and a [prometheus.Collector]:
// give it to the backend (worklease.WithObserver) and to the pool
// (worker.WithObserver), and register it. It exports
//
//   - worklease_events_total{kind}: every transition it is told about, by
//     the kind's name (EventKind.String: "Processed", "Retrying", ...);
//   - worklease_in_flight: handlers started (EventStarted) and not ended;
//   - worklease_handler_duration_seconds{outcome}: how long each handler
//     ran, from EventStarted to the end of the same lease's attempt:
//     EventProcessed, EventRetrying, EventDeadLettered, EventExpired or
//     EventLeaseLost, which is the outcome label;
//   - worklease_handler_untracked_total: attempts it stopped timing to stay
//     within Options.MaxTracked (see there);
//   - worklease_queued, if Options.Queued is set: what it returns at each
//     scrape, such as the pool's Stats().Queued.
//
// The names start with Options.Namespace instead if that is set.
//
// # Concurrency
//
// Observe is safe to call from many goroutines at once, as a backend and a
// pool do, and with Collect. It holds one lock for a map lookup, and starts
// no goroutine.
package workleaseprom
