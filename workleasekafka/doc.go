// Package workleasekafka is a Kafka consumer that processes each
// partition's records in parallel across keys, on franz-go: one record at
// a time per key, in the partition's order, with as many handlers as you
// like, where a plain consumer runs one partition's records one after the
// other, and so no more handlers than partitions.
//
//	c, err := workleasekafka.New([]kgo.Opt{
//		kgo.SeedBrokers("localhost:9092"),
//		kgo.ConsumerGroup("billing"),
//		kgo.ConsumeTopics("orders"),
//	}, func(ctx context.Context, r *kgo.Record) error {
//		return apply(ctx, r) // an error: retried after a backoff, before the key's next record
//	}, workleasekafka.WithHandlers(64), workleasekafka.WithDeadLetterTopic("orders.dlq"))
//	if err != nil {
//		return err
//	}
//	go c.Run(ctx)
//	...
//	c.Close(shutdownCtx) // lets the running handlers finish, commits, leaves the group
//
// # Order and commits
//
// A [Consumer] runs on a worker.Pool over an in-memory worklease.Manager
// with monotonic offsets: each record's domain is its partition and its key
// (the record's key, or [WithKeyFunc]'s), its offset the record's, so each
// key's records run one at a time, in offset order, while the keys of one
// partition run at once. (A key's records fetched while its earlier ones
// wait are handed to the Pool together, as one job that runs them in
// order, each with attempts of its own: a Consumer that falls behind pays
// the Pool's cost once for many records.) Records then finish out of
// order, so the Consumer
// commits each partition at its lowest unfinished record (or past its last
// record, when none is unfinished), as Confluent's Parallel Consumer does:
// every record below a commit is finished, and those above it that are
// finished already run again after a crash (at least once) unless
// [WithCommitMetadata] lists them in the commit. Each commit point is
// checked against the records pending before it is sent. Commits go out
// every [WithCommitInterval], on revocation and on Close.
//
// # Failures
//
// A handler that fails (an error or a panic) is tried again after the
// backoff ([WithBackoff]), before any later record of its key, up to
// [WithMaxRetries] times. Then the record is given up on: produced to the
// dead-letter topic ([WithDeadLetterTopic]), with headers that say why,
// after how many attempts and where it came from, and its key carries on;
// or, with [WithParkOnFailure], its key parks until an operator calls
// [Consumer.Resume] or [Consumer.Skip].
//
// # Rebalances
//
// When partitions are revoked, the Consumer starts no more of their
// records, lets the handlers running on them finish (within
// [WithRevokeTimeout], then cancels them with [ErrRevoked]), commits what
// finished and drops the rest of their records, which the new owner runs.
// Lost partitions are dropped at once, without a commit. An assigned
// partition starts at the group's commit. A handler that ignores its
// context's cancellation can still be running when the next owner runs the
// same record, as with any Kafka consumer.
//
// # Back-pressure
//
// The Consumer hands its handlers at most [WithMaxUnfinished] records
// unfinished (a few more at most, see the option): beyond, it hands them
// no more until half of them are done. It polls records ahead of them, so
// that kgo fetches the next while the handlers work on the last (kgo
// fetches again only once its last fetch was polled whole): whenever
// fewer than WithMaxUnfinished records wait to be handed over, it takes
// all kgo has fetched. So it holds, besides the records its handlers
// have, fewer than WithMaxUnfinished records and one fetch from each
// broker (see kgo.FetchMaxBytes) polled ahead, and kgo one more fetch. A
// slow partition that holds half of the handlers' records for long while
// others are assigned is paused (kgo's PauseFetchPartitions) and set
// aside, with its records polled ahead, so that it leaves room for the
// others.
//
// # Observability
//
// [Consumer.Stats] counts records handled, retried, dead-lettered and
// skipped, and the partitions paused; [WithErrorFunc] hears the errors the
// Consumer carries on after. [WithMiddleware] wraps each attempt, for
// tracing: the workleaseotel module's middleware, given a
// [HeaderCarrier] of the record ([RecordFromContext]), links each
// attempt's span to the trace context the producer put in the record's
// headers.
package workleasekafka
