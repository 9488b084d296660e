// Package pg keeps the lease contract of package worklease in PostgreSQL,
// so that any number of processes, on any number of machines, share one
// set of domains: a domain's lease, backlog, processed and failed offsets
// and fence live in the database, and every call is one transaction.
//
// A [Manager] offers the calls of worklease.Manager with a context first,
// and satisfies [worklease.Backend]: its results, statuses and errors are
// the worklease package's, so errors.Is(err, worklease.ErrTokenMismatch)
// holds for either. [Open] installs or upgrades the package's schema
// (idempotent, and safe when processes start together) and reads the same
// worklease.Option values as worklease.New.
//
// # Calls
//
// Each call is a transaction of its own, which locks the domain's row
// before it reads anything else of the domain, so that calls on one domain
// from any process are serialized and each sees the one before it. A
// stale token is refused by the statement that would apply it. No
// transaction is held open across work, and no advisory lock stands for a
// lease.
//
// The usual cycle is two round trips, each one UPDATE of the domain's row:
// TryAcquire that grants an idle, running domain with nothing queued or
// failed, and Succeed (or SucceedNext) that finishes a lease with nothing
// queued behind it. When its shortcut does not apply, that UPDATE changes
// nothing and the call's server-side function decides, in a second round
// trip. Every other call is one round trip, a server-side function of a
// few statements, except Reap, one for each hundred leases it expires.
//
// # Pulling work
//
// [Manager.Enqueue] stores an offset with a payload without granting it,
// and [Manager.Claim] leases the heads of ready domains to whichever
// worker asks, in any process, with their payloads; [Manager.Retry] ends
// a failed attempt so that the offset waits out a delay at the front of
// its domain's line, for any worker to claim. Claims take over domains
// whose lease is due, and serve the domains that have waited longest
// first, after those of a higher priority ([Manager.SetPriority]).
// [Manager.EnqueueMany] and [Manager.SucceedMany] take batches, each in
// one round trip; [Manager.ClaimNext] ends a batch and leases the same
// domains' next offsets to the caller in the same statement, a few times
// in a row at most ([MaxStreak]). [Manager.WaitClaim] waits for work: the
// database notifies the Manager when a call of any process makes a domain
// ready.
//
// Claim (unless a lease is due), SucceedMany and ClaimNext are each one
// statement, with no server-side function; EnqueueMany's function takes a
// few statements for a whole batch, whatever its size.
//
// The producers' calls are the contract's. [Manager.Enqueue] and
// [Manager.EnqueueMany] store an offset the caller chose, and say so when
// the domain holds it already (AlreadyQueued, AlreadyAcquired,
// AlreadyProcessed, AlreadyFailed), or refuse one held with another
// payload (worklease.ErrPayloadMismatch; a batch with such an item stores
// nothing). [Manager.EnqueueAt] stores one that no call grants before its
// time: a claim that finds its domain ready with that head puts the domain
// off until then. [Manager.Append] has the database assign the domain's
// next offset under the domain's row lock, so that offsets are unique
// across every process and in commit order; with an idempotency key it
// stores nothing when repeated within the key window
// (worklease.WithKeyWindow), as the schema's append_keys table remembers
// each key (176 bytes for a key of 14 bytes on a domain of 11, measured)
// until a vacuum of the Manager deletes it. [Manager.Cancel] ends a queued or scheduled offset, or the one
// in flight if asked, without a dead letter. A payload above the limit
// (worklease.WithMaxPayload) is refused before it reaches the database.
//
// [Manager.EnqueueTx], [Manager.EnqueueManyTx] and [Manager.AppendTx]
// enqueue in the caller's pgx.Tx, beside the application's own writes:
// what they store is there if and only if it commits, and the wake-up of
// waiting claims goes out with the commit. They hold the rows of the
// domains they name until the transaction ends, so that every other call
// on those domains waits for it (see [Manager.EnqueueTx]): keep such a
// transaction short.
//
// WithObserver hears the transitions of this process's calls (but for the
// Tx calls', which take effect at a commit it does not see): each call's
// events are told, in order, by the goroutine that made the call, once it
// returns. Calls on one domain from different goroutines may tell theirs
// in either order. Stats counts the transitions of every process.
//
// # Roles and connections
//
// [Open] waits, within its context, for a database that is starting up.
// Installing or upgrading the schema takes a role that may create it. Once
// it is up to date, an application's role that owns nothing and may create
// nothing opens it too, with USAGE on the schema, SELECT, INSERT, UPDATE
// and DELETE on its tables and USAGE on its sequences. Besides its pool's
// connections, a Manager opens two of its own, as the pool opens and
// closes one (with its settings and its BeforeConnect, AfterConnect and
// BeforeClose hooks): one on which WaitClaim listens, and one while it vacuums the tables that claims read
// (see [Manager.Claim]); a role that does not own them opens that one
// once, to learn that it may not.
//
// # Time
//
// A lease's expiry is read against the database server's clock, so that
// processes with skewed clocks agree; worklease.WithClock replaces it, for
// tests.
//
// # Domains
//
// A domain is any 1 to worklease.MaxDomainLen bytes. An index cannot hold
// the longest domains whole, so the schema finds a domain by its key: the
// domain itself up to 1,024 bytes, else its first 1,024 bytes and its
// SHA-256; every lookup checks the domain's bytes too. The listings order
// domains by key, which is the order of their bytes but among long
// domains that share their first 1,024 bytes.
//
// # Tokens
//
// A token is made of the domain's fence, the domain's serial number (from
// a sequence, never reused) and the database's instance (random, chosen
// when the schema is installed), so it is unique across every process and
// restart that shares the database. A domain's fence only grows, across
// Forget too: a forgotten domain keeps a row with its fence and nothing
// else, and comes back above it.
//
// # Failover
//
// A fence grows across failovers too, even one that loses commits: with
// asynchronous replication a standby promoted to primary may lack the last
// grants the old primary acknowledged, and with them the fences the
// domains' rows held, which the next grants would hand out again. So every
// grant takes its fence above the floor of the server's current timeline
// (the number of the write-ahead log's history, which every promotion
// raises and no lost commit takes back): (timeline - 1) * 2^40. On the
// first timeline the floor is 0 and fences go 1, 2, 3; after a promotion a
// domain's next fence jumps above 2^40, above every fence of the timelines
// before, and so does the whole token, whose serial may repeat one the
// lost commits took. Storage compares Token.Fence() as one integer, as
// always: nothing changes for it. It costs a grant reading the timeline
// from the name of the current write-ahead log file, in the grant's
// UPDATE: under a microsecond of the server's time, which
// BenchmarkPostgresCycle cannot tell apart from its noise (see
// docs/operations.md). It holds while a
// domain takes fewer than 2^40 grants in one timeline, and while the
// timeline is below 8,388,609, past which grants fail. After pg_upgrade,
// or the restore of a dump into a new cluster, the timeline starts again
// at 1 while the domains keep their fences: the schema's owner runs
// SELECT worklease.rebase_fences() once, which raises the floor above
// them. It does not hold with synchronous_commit = off, under which a
// crash of the primary alone may lose acknowledged commits without a new
// timeline.
//
// On a server that takes no writes, a standby or a primary set read-only,
// a call that writes changes nothing and returns an error matching
// [ErrReadOnly]; the Manager closes its connections to that server, so
// that a pool whose connection string names the primary and its standbys
// with target_session_attrs=read-write finds the server that takes writes
// by itself, the promoted standby after a failover. Waiting claims, the
// connection WaitClaim listens on and the Manager's vacuums connect again
// likewise. Inspect and the listings read a read-only server as it is.
// docs/operations.md describes what a failover looks like to workers, and
// what each replication mode can lose.
package pg
