// Package worklease gives exclusive, ordered processing per domain key, in
// process: at most one unit of work in flight per domain (a tenant, an
// account, a Kafka key, an aggregate id), a de-duplicated FIFO backlog behind
// it, idempotence for finished work, and fencing tokens so that a stale worker
// can never finish work it no longer owns.
//
// Delivery is at least once: a worker that crashes, or loses its lease,
// after its effect and before it reports success sees the offset run
// again, under a higher fence. So make each effect idempotent by (domain,
// offset), and pass the lease's fence ([Token.Fence]) to storage that
// refuses a write under a fence lower than the last it saw.
//
// A [Manager] is called directly from orchestrator goroutines. It does not
// schedule, sleep or back off: the orchestrator owns timing and gets hints
// back (a worker that asks to wait for work can, with
// [Manager.WaitClaim]).
//
// # The protocol
//
// A unit of work is an offset (a non-negative int64) in a domain (a string
// of 1 to [MaxDomainLen] bytes).
// The orchestrator drives each one through four steps:
//
//  1. Acquire: [Manager.TryAcquire](domain, offset). [Acquired] means the
//     caller now holds the domain's lease under the returned [Token];
//     [Enqueued] means another offset is in flight and this one waits in the
//     backlog; [AlreadyAcquired], [AlreadyProcessed] and [AlreadyFailed] mean
//     there is nothing to do.
//  2. Work on the offset.
//  3. Finish: [Manager.Succeed](domain, token) or [Manager.Fail](domain,
//     token, cause). Fail keeps the lease and returns [RetryScheduled] while
//     retries remain; the orchestrator backs off, computing the delay from the
//     retry count and acquired time, and tries again under the same token.
//     Once retries run out it gives up: [GiveUpNoBacklog] or [GiveUpNextHint].
//  4. Go on to the next offset: Succeed and Fail never hand the lease to the
//     next offset themselves. They release it and return the backlog's head
//     ([NextHint], [GiveUpNextHint]), which the orchestrator acquires with
//     TryAcquire when it chooses to; until then the domain is idle with a
//     backlog, and TryAcquire of any other offset returns a
//     [*BacklogOrderError]. [Manager.SucceedNext] and [Manager.FailNext]
//     leave no such gap: they finish the offset and lease the backlog's head
//     to the caller in the same step ([NextAcquired], [GiveUpNextAcquired]),
//     so a worker that uses them works through its domain in order while
//     new offsets are simply queued.
//
// # Pulling work
//
// Workers can pull instead: [Manager.Enqueue] stores an offset, with a
// payload if it has one, and never grants it, even on an idle domain;
// [Manager.Claim] leases the heads of up to n ready domains (idle,
// running, with a backlog, and past any retry delay), the longest waiting
// first, so that one deep backlog cannot starve the others, and returns
// them as [Claim] values with their payloads and tokens. The worker ends a
// claim with [Manager.Succeed] or [Manager.SucceedMany], with
// [Manager.ClaimNext], which also leases it each domain's next offset (up
// to [MaxStreak] in a row), or with [Manager.Retry], which ends the lease as a failed attempt and puts the
// offset back at the front of its domain's line until a delay has passed
// (or makes it a dead letter once out of retries), so that no worker
// holds it while it waits. [Manager.WaitClaim] waits until there is
// something to claim. A claim first takes over leases that are due, so a
// crashed worker's domain comes back without a reaper. The Manager keeps
// its list of ready domains only once a pull call has been made; a Manager
// that is only pushed to pays nothing for it. The worker package runs a
// handler on these calls, for those who would rather not write the loop.
//
// # Producing work
//
// [Manager.Enqueue] stores an offset the caller numbered; an offset the
// domain holds already is stored once and the answer says so
// ([AlreadyQueued] and the others), and one held with another payload is
// refused with [ErrPayloadMismatch]. [Manager.Append] stores work that has
// no number of its own under the domain's next offset, which it returns,
// unique across producers, with an optional idempotency key
// ([AppendOptions], [WithKeyWindow]); give a domain one kind of producer,
// as assigned offsets go above whatever the domain holds.
// [Manager.EnqueueAt] and AppendOptions.NotBefore schedule an offset, which
// holds the domain's later offsets behind it. A payload is at most
// [DefaultMaxPayload] bytes unless [WithMaxPayload] says otherwise
// ([ErrPayloadTooLarge]). [Manager.Cancel] withdraws work without a dead
// letter; [Manager.Kill] fails it. With a journal, payloads, schedules and
// retry delays are journaled, and a [PayloadJournal] (the wal package's
// Log) keeps the payloads' bytes out of memory.
//
// # States
//
// A domain is either in flight (it holds a lease on one offset) or idle (it
// holds none). There is no sleeping state: a lease whose attempt failed and
// waits for a retry is still in flight.
//
// # Invariants
//
// For every domain, at all times:
//
//  1. Single in-flight unit: at most one lease, on exactly one offset.
//  2. Disjointness: the current offset is neither terminal nor queued, and
//     the backlog holds no terminal offset.
//  3. FIFO discipline: the backlog is drained only by grants (TryAcquire,
//     SucceedNext and FailNext), and only from its head. While it is not
//     empty, acquiring any other offset on an idle domain returns a
//     [*BacklogOrderError].
//  4. Idempotence: a terminal offset (processed or failed) is never queued or
//     granted again.
//  5. Token fencing: Succeed and Fail act only for the current lease's token;
//     any other returns an error ([ErrTokenMismatch], or [ErrLeaseExpired]
//     for a lease that ran out of time), and every grant's [Token.Fence] is
//     larger than the domain's previous one.
//  6. Stable monitor: a domain's record, and the lock in it, is created once
//     and never replaced.
//
// # Errors
//
// Errors report bugs in the caller, never normal outcomes, and a call that
// returns one has changed nothing. Test them with errors.Is: [ErrBacklogOrder]
// (as [*BacklogOrderError] with errors.As), [ErrTokenMismatch], [ErrNoLease],
// [ErrLeaseExpired], [ErrLeaseRevoked], [ErrInvalidOffset],
// [ErrInvalidDuration], [ErrClosed], the admin calls' [ErrNotDeadLettered],
// [ErrAlreadyProcessed] and [ErrDomainBusy], the pull calls'
// [ErrInvalidClaim] and [ErrPayloadNotJournaled], and [ErrInvalidConfig]
// from [New]. No input makes the package panic.
//
// # Options
//
// With no options a Manager is the contract above and nothing more: leases
// never expire, queued offsets run first in, first out, and an offset gets
// [DefaultMaxRetries] retries. Options add behaviour, each off by default:
//
//   - [WithMaxRetries] sets how many retries an offset gets before it is
//     given up on ([DefaultMaxRetries]). Send failures straight to the dead
//     letters with WithMaxRetries(0), or retry first with WithMaxRetries(n);
//     a given-up offset is always kept as a [DeadLetter].
//   - [WithLeaseTTL] makes leases expire unless renewed with
//     [Manager.Extend]. An expired lease is revoked when its domain is next
//     touched, or by [Manager.Reap]; its holder gets [ErrLeaseExpired], and
//     the expiry counts as a failed attempt: the offset goes back to the
//     front of the line under a new token, or is dead-lettered once out of
//     retries. Time is read from the [Clock] given to [WithClock].
//   - [WithOrdering] chooses [FIFO] (the default) or [LIFO];
//     [WithBestEffortOrdering] lets an idle domain grant an offset out of
//     turn, reporting it as [EventOutOfOrder].
//   - [WithParkOnDeadLetter] pauses a domain when one of its offsets is
//     dead-lettered, until [Manager.Resume].
//   - [WithMonotonicOffsets] is for domains whose offsets only grow, such as
//     a Kafka partition split by key: every offset at or below a domain's
//     highest terminal offset that is not failed, queued or in flight counts
//     as processed, as with Kafka's committed offsets. Memory per domain
//     stays constant however sparse the offsets, and offsets replayed after
//     a consumer restart answer [AlreadyProcessed]. A journal records
//     whether it was written with it ([RecordSettings]), so the option can
//     be switched at any restart.
//   - [WithObserver] reports every transition as an [Event].
//
// # Operators
//
// [Manager.Domains], [Manager.Inspect], [Manager.Leases],
// [Manager.DeadLetters] and [Manager.Stats] look; [Manager.Kill],
// [Manager.Redrive], [Manager.ForceRelease], [Manager.Pause],
// [Manager.Resume] and [Manager.Forget] repair. Redrive (a failed offset
// runs again, first in its domain's line), Kill (an offset fails without
// running) and Forget (a domain's history is dropped) are deliberate
// exceptions to idempotence.
// Admin calls that leave a domain idle with a backlog return its head, since
// no Succeed or Fail will hint at it: acquire it to keep the domain moving.
//
// # Durability
//
// A Manager keeps its state in memory. [WithJournal] journals every
// transition as a [Record] to a [Journal], such as the wal package's Log, and
// [New] rebuilds the state from it after a restart, checking every record
// against the state before it. A call returns only once the journal holds,
// durably, its records and every earlier record of its domain; if the
// journal fails, the Manager fails closed with [ErrJournalFailed].
//
// # Concurrency
//
// A Manager is safe for concurrent use. Without a journal it starts no
// goroutines; with one, it writes snapshots in a goroutine of its own, which
// [Manager.Close] waits for. Domains are spread over shards, each with its
// own lock, and every domain has its own mutex: calls on different domains
// rarely contend, and calls on one domain are serialized. No lock is held
// while the Manager calls code outside the package, such as a [Clock]
// passed to [WithClock] or an [Observer], except a [Journal]'s
// AppendRecord, which runs under the domain's lock by design.
//
// # Backends
//
// The contract is not the Manager's alone. [Backend] states it as an
// interface whose calls take a context first, for implementations that keep
// their state elsewhere, such as a database shared by many processes;
// [Manager.Backend] adapts the Manager to it, so code written against
// Backend runs on either, pull calls included. A backend reads the same [Option] values through
// [NewConfig], builds its tokens with [NewToken], and returns the result,
// status, info and error types of this package. The leasetest package
// checks that a backend keeps the contract: one call runs its scenarios,
// error paths, the time-limited leases, ordering, admin calls, monotonic
// offsets, events and a property test against a model of it.
//
// # Design
//
// The package has two layers. At its core is a pure state machine of one
// domain: given the domain's state, a call with its arguments, the time
// and the options, it decides the answer and the changes the call makes,
// and applies them. Each kind of change has one function that applies it,
// for a live call and for replay alike, so a journal's records rebuild
// exactly the state the calls made. Around it, the Manager holds the
// domains (a sharded map, a lock per domain, an index of the leases that
// expire), reads the clock, counts the changes for [Manager.Stats],
// journals them and tells the observer.
//
// # Memory
//
// Terminal offsets are kept as sorted runs of consecutive offsets, so their
// cost grows with the holes between them, not with how many there are: a
// domain that processed a million offsets in order keeps one run. With
// [WithMonotonicOffsets] the holes cost nothing either: processed offsets
// are one run from 0 to the highest terminal offset.
//
// A domain's own state takes 192 bytes, about 240 with its key and its
// place in the Manager's table, and the fields that TryAcquire and Succeed
// use share two cache lines. What only some domains need (dead letters,
// attempts carried over after an expiry or [Manager.ForceRelease], the
// latest revoked token) is kept apart by the domains that have it, and a
// domain's backlog is allocated when its first offset is queued. The
// payloads the producers store are kept apart in the same way, by the
// domains that have them, until their offsets succeed: their bytes, or,
// with a PayloadJournal, where the journal holds them (a million queued
// payloads then cost about 124 MiB of heap, whatever their size).
package worklease
