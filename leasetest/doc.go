// Package leasetest checks that a [worklease.Backend] keeps the lease
// contract, in the spirit of testing/fstest.TestFS: one call, [Run], runs
// the whole contract against any implementation, given a constructor. The
// in-memory Manager runs it through Manager.Backend, and so does every other
// backend, such as one that keeps its state in a database.
//
//	func TestBackend(t *testing.T) {
//		leasetest.Run(t, leasetest.Suite{
//			New: func(t *testing.T, opts ...worklease.Option) worklease.Backend {
//				return newBackend(t, opts...)
//			},
//		})
//	}
//
// # What it checks
//
// Run checks, each area in a subtest of its own: the protocol's scenarios
// (acquire, succeed, fail, retry and give up, the hand-off to the backlog,
// idempotence, strict order); every error path, each with errors.Is and
// each changing nothing that Inspect, Leases, DeadLetters and Domains
// report; lease TTLs, Extend and Reap; FIFO, LIFO and best-effort ordering;
// the operators' calls; the pull calls (Enqueue, Claim, WaitClaim, Retry,
// SucceedMany, ClaimNext: claim order and fairness, retry delays,
// takeovers of due leases, waiting claims, payloads, streaks); WithMonotonicOffsets; the observer's
// events; calls with a done context; restarts; concurrent use; and a model
// test, which
// draws long sequences of calls and options at random with
// pgregory.net/rapid and compares every result, and what every look reports
// after every step, with a plain model of the contract. rapid's own flags
// and environment set how many cases the model test runs (-rapid.checks,
// RAPID_CHECKS; the default is 100), and a failing case is shrunk and
// reported by its steps and their values. [Fuzz] runs the same model as a
// fuzz target.
//
// The package is for tests: it imports the standard library's testing,
// and pgregory.net/rapid for the model test, which the worklease module
// already requires for its own tests; the worklease package itself imports
// neither.
//
// # What a backend must honour
//
// New gets the Options the suite chose; the backend reads them with
// worklease.NewConfig, and offers every setting of [worklease.Config] but
// the Manager's own (Shards, Journal). In particular:
//
//   - WithClock: the suite controls time through its [Clock], and advances
//     it to make leases expire. A backend must read time only from the
//     Clock in its Config, and never compare it with another clock (a
//     database server's, say).
//   - The results, errors and order of checks are those the Manager's
//     documentation states, and a refused call changes nothing.
//   - Times are compared as instants (time.Time.Equal) and errors in
//     results by their text, so a backend may store times in UTC at
//     microsecond precision, and causes as text; the suite's times are whole
//     milliseconds.
//
// # Capabilities
//
// The [Suite] fields say what the backend can do beyond the contract:
// Reopen, to check that its state survives a restart; Events, to check the
// events it reports to an Observer; Payloads, to check the payloads it
// keeps for Enqueue; and Check, to check its own invariants after every
// step of the model test. The cases that need a capability the backend
// lacks are skipped.
package leasetest
