package leasetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// Suite describes the backend under test.
type Suite struct {
	// New returns a new, empty backend configured by opts, which always
	// include WithClock with the suite's own [Clock]. The suite closes the
	// backend when the test that made it ends; register any other cleanup
	// with t.Cleanup. Run calls New from parallel subtests, and the model
	// test calls it once or twice for each case it runs, all under one t,
	// so cleanup registered with t runs only at the end of the model test:
	// release what a backend holds in its Close where that matters.
	New func(t *testing.T, opts ...worklease.Option) worklease.Backend

	// Reopen, if not nil, closes b (which may be closed already) and
	// returns a backend over the same durable state, configured by opts
	// (the options b was made with).
	// The suite then checks that every state survives a restart, in
	// the Restart cases and as a step of the model test. Without it,
	// those are skipped.
	Reopen func(t *testing.T, b worklease.Backend, opts ...worklease.Option) worklease.Backend

	// Events says that the backend reports transitions to the Observer
	// given with WithObserver, as the Manager does. Without it the suite
	// passes no observer, and skips the Observer cases.
	Events bool

	// Payloads says that the backend keeps the payloads Enqueue stores
	// and Claim returns. Without it the suite enqueues nil payloads only,
	// and skips the cases that store others.
	Payloads bool

	// Lacks lists the parts of the contract the backend does not
	// implement yet, for a backend on its way to the whole of it: each
	// case that needs one is skipped, saying which, and the model test
	// makes no call whose answer needs one. The rest is checked as
	// usual. A complete backend leaves it empty.
	Lacks []Feature

	// Check, if not nil, is called with the backend after every step of
	// the model test and at the end of every other case that passed (an
	// error matching ErrClosed is ignored there), to check the
	// implementation's own invariants; a non-nil error fails the test.
	// It is called only while no call is under way, and must change
	// nothing: in particular it must not revoke expired leases, as Inspect
	// does, since the suite checks when that happens.
	Check func(b worklease.Backend) error
}

// Run runs the whole contract against the backend s describes, each area
// in a subtest of its own: Scenarios (the protocol, SucceedNext and
// FailNext), Errors, Domains (the longest domains in every call, and how
// errors name a domain), TTL (Extend and ExtendMany among them), Ordering,
// Admin, Listing (the paged listings, Stats and Totals), Pull (Enqueue, Claim, WaitClaim, Retry, RetryMany, SucceedMany
// and ClaimNext), Produce (duplicates, Append and its keys, the payload
// limit, EnqueueAt, Cancel), Monotonic, Observer, Context, Restart, Concurrency and
// Model. The cases inside an area run in
// parallel; the Model area's cases are rapid's. A backend that lacks a
// capability the Suite describes has the areas that need it skipped.
func Run(t *testing.T, s Suite) {
	t.Helper()
	if s.New == nil {
		t.Fatal("leasetest: Suite.New is nil")
	}
	for _, a := range areas {
		t.Run(a.name, func(t *testing.T) { a.run(t, &s) })
	}
}

// A Feature is a part of the contract that a backend may not implement
// yet (see Suite.Lacks).
type Feature string

// The parts of the contract a backend may lack.
const (
	// FeatureDuplicates: Enqueue answers AlreadyQueued for an offset
	// queued already, and refuses an offset held with another payload
	// with an error matching ErrPayloadMismatch.
	FeatureDuplicates Feature = "Duplicates"
	// FeaturePayloadLimit: WithMaxPayload, and ErrPayloadTooLarge for a
	// payload above the limit.
	FeaturePayloadLimit Feature = "PayloadLimit"
	// FeatureAppend: Append, its assigned offsets and idempotency keys.
	FeatureAppend Feature = "Append"
	// FeatureEnqueueAt: scheduled work, EnqueueAt and Append's NotBefore.
	FeatureEnqueueAt Feature = "EnqueueAt"
	// FeatureCancel: Cancel, its event and its count.
	FeatureCancel Feature = "Cancel"
)

// lacks reports whether the backend lacks any of fs.
func (s *Suite) lacks(fs ...Feature) bool {
	for _, f := range fs {
		if f != "" && slices.Contains(s.Lacks, f) {
			return true
		}
	}
	return false
}

// need skips t if the backend lacks any of fs, naming it.
func (s *Suite) need(t testing.TB, fs ...Feature) {
	t.Helper()
	for _, f := range fs {
		if s.lacks(f) {
			t.Skipf("the backend lacks %s yet (Suite.Lacks)", f)
		}
	}
}

// areas are the parts of the contract Run checks, in order.
var areas = []struct {
	name string
	run  func(*testing.T, *Suite)
}{
	{"Scenarios", testScenarios},
	{"Errors", testErrors},
	{"Domains", testDomains},
	{"TTL", testTTL},
	{"Ordering", testOrdering},
	{"Admin", testAdmin},
	{"Listing", testListing},
	{"Pull", testPull},
	{"Produce", testProduce},
	{"Monotonic", testMonotonic},
	{"Observer", testObserver},
	{"Context", testContext},
	{"Restart", testRestart},
	{"Concurrency", testConcurrency},
	{"Model", testModel},
}

// A testCase is one case of an area.
type testCase struct {
	name string
	run  func(t *testing.T, s *Suite)
}

// runCases runs each case of the lists in a parallel subtest.
func runCases(t *testing.T, s *Suite, lists ...[]testCase) {
	t.Helper()
	for _, cases := range lists {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, s)
			})
		}
	}
}

// epoch is the time every backend of the suite starts at. Whole seconds in
// UTC, so that a backend that keeps times at microsecond precision, or in
// UTC, reports the same instants.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// An env is one backend under test, with its clock.
type env struct {
	t    *testing.T
	s    *Suite
	clk  *Clock
	b    worklease.Backend
	ctx  context.Context
	opts []worklease.Option // as given to New, the clock's included
	rec  *recorder          // the observer's events; nil unless observed
}

// start makes a backend configured by opts, on a new Clock at epoch. The
// backend is checked with Suite.Check and closed when t ends.
func (s *Suite) start(t *testing.T, opts ...worklease.Option) *env {
	t.Helper()
	e := &env{t: t, s: s, clk: NewClock(epoch), ctx: t.Context()}
	e.opts = append([]worklease.Option{worklease.WithClock(e.clk)}, opts...)
	e.b = s.New(t, e.opts...)
	if e.b == nil {
		t.Fatal("leasetest: Suite.New returned nil")
	}
	t.Cleanup(func() {
		if s.Check != nil && !t.Failed() {
			if err := s.Check(e.b); err != nil && !errors.Is(err, worklease.ErrClosed) {
				t.Errorf("Check: %v", err)
			}
		}
		e.b.Close() // the case may have closed it already
	})
	return e
}

// startObserved is start with an observer whose events e.rec records. It
// skips t unless the backend reports events.
func (s *Suite) startObserved(t *testing.T, opts ...worklease.Option) *env {
	t.Helper()
	if !s.Events {
		t.Skip("the backend reports no events (Suite.Events is false)")
	}
	rec := &recorder{}
	e := s.start(t, append(opts, worklease.WithObserver(rec))...)
	e.rec = rec
	return e
}

// reopen restarts the backend over its durable state. It skips the test if
// the Suite has no Reopen.
func (e *env) reopen() {
	e.t.Helper()
	if e.s.Reopen == nil {
		e.t.Skip("the backend cannot be reopened (Suite.Reopen is nil)")
	}
	e.b = e.s.Reopen(e.t, e.b, e.opts...)
	if e.b == nil {
		e.t.Fatal("leasetest: Suite.Reopen returned nil")
	}
}

// check runs Suite.Check, if any.
func (e *env) check() {
	e.t.Helper()
	if e.s.Check != nil {
		mustNoError(e.t, e.s.Check(e.b), "Check")
	}
}

// The calls, each failing the test on an error.

func (e *env) acquire(d string, off int64, want worklease.AcquireStatus) worklease.AcquireResult {
	e.t.Helper()
	res, err := e.b.TryAcquire(e.ctx, d, off)
	mustNoError(e.t, err, "TryAcquire(%q, %d)", d, off)
	mustEqual(e.t, want, res.Status, "TryAcquire(%q, %d)", d, off)
	if want == worklease.Acquired || want == worklease.AlreadyAcquired {
		mustFalse(e.t, res.Token.IsZero(), "TryAcquire(%q, %d): zero token", d, off)
	}
	return res
}

func (e *env) succeed(d string, tok worklease.Token) worklease.SucceedResult {
	e.t.Helper()
	res, err := e.b.Succeed(e.ctx, d, tok)
	mustNoError(e.t, err, "Succeed(%q, %v)", d, tok)
	return res
}

func (e *env) succeedNext(d string, tok worklease.Token) worklease.SucceedResult {
	e.t.Helper()
	res, err := e.b.SucceedNext(e.ctx, d, tok)
	mustNoError(e.t, err, "SucceedNext(%q, %v)", d, tok)
	return res
}

func (e *env) fail(d string, tok worklease.Token, cause error) worklease.FailResult {
	e.t.Helper()
	res, err := e.b.Fail(e.ctx, d, tok, cause)
	mustNoError(e.t, err, "Fail(%q, %v)", d, tok)
	return res
}

func (e *env) failNext(d string, tok worklease.Token, cause error) worklease.FailResult {
	e.t.Helper()
	res, err := e.b.FailNext(e.ctx, d, tok, cause)
	mustNoError(e.t, err, "FailNext(%q, %v)", d, tok)
	return res
}

func (e *env) extend(d string, tok worklease.Token, by time.Duration) time.Time {
	e.t.Helper()
	at, err := e.b.Extend(e.ctx, d, tok, by)
	mustNoError(e.t, err, "Extend(%q, %v, %v)", d, tok, by)
	return at
}

func (e *env) inspect(d string) worklease.DomainInfo {
	e.t.Helper()
	info, err := e.b.Inspect(e.ctx, d)
	mustNoError(e.t, err, "Inspect(%q)", d)
	return info
}

func (e *env) leases() []worklease.LeaseInfo {
	e.t.Helper()
	ls, err := e.b.Leases(e.ctx)
	mustNoError(e.t, err, "Leases")
	return ls
}

func (e *env) domains() []string {
	e.t.Helper()
	ds, err := e.b.Domains(e.ctx)
	mustNoError(e.t, err, "Domains")
	return ds
}

func (e *env) deadLetters(d string) []worklease.DeadLetter {
	e.t.Helper()
	dls, err := e.b.DeadLetters(e.ctx, d)
	mustNoError(e.t, err, "DeadLetters(%q)", d)
	return dls
}

func (e *env) kill(d string, off int64, reason string) worklease.Head {
	e.t.Helper()
	h, err := e.b.Kill(e.ctx, d, off, reason)
	mustNoError(e.t, err, "Kill(%q, %d)", d, off)
	return h
}

func (e *env) redrive(d string, off int64) worklease.Head {
	e.t.Helper()
	h, err := e.b.Redrive(e.ctx, d, off)
	mustNoError(e.t, err, "Redrive(%q, %d)", d, off)
	return h
}

func (e *env) forceRelease(d string) worklease.Head {
	e.t.Helper()
	h, err := e.b.ForceRelease(e.ctx, d)
	mustNoError(e.t, err, "ForceRelease(%q)", d)
	return h
}

func (e *env) pause(d string) {
	e.t.Helper()
	mustNoError(e.t, e.b.Pause(e.ctx, d), "Pause(%q)", d)
}

func (e *env) resume(d string) worklease.Head {
	e.t.Helper()
	h, err := e.b.Resume(e.ctx, d)
	mustNoError(e.t, err, "Resume(%q)", d)
	return h
}

func (e *env) reap() []worklease.Expiry {
	e.t.Helper()
	exps, err := e.b.Reap(e.ctx)
	mustNoError(e.t, err, "Reap")
	return exps
}

func (e *env) forget(d string) {
	e.t.Helper()
	mustNoError(e.t, e.b.Forget(e.ctx, d), "Forget(%q)", d)
}

// A state is everything the calls that look report, for the domains the
// backend knows and any others named.
type state struct {
	Domains     []string
	Leases      []worklease.LeaseInfo
	DeadLetters []worklease.DeadLetter
	Info        map[string]worklease.DomainInfo
}

// state returns what the backend reports now. Inspect revokes expired
// leases: take a state only when none is due, or after they were revoked.
func (e *env) state(extra ...string) state {
	e.t.Helper()
	st := state{Domains: e.domains(), Leases: e.leases(), DeadLetters: e.deadLetters(""), Info: map[string]worklease.DomainInfo{}}
	for _, d := range slices.Concat(st.Domains, extra) {
		st.Info[d] = e.inspect(d)
	}
	return st
}

// refused checks that call returns an error matching want, and none of the
// other sentinels, and changes nothing the backend reports for its domains
// and those in extra.
func (e *env) refused(want error, call func() error, extra ...string) {
	e.t.Helper()
	before := e.state(extra...)
	err := call()
	mustSentinel(e.t, want, err)
	mustEqual(e.t, before, e.state(extra...), "the refused call changed the state")
}

// token makes a token with NewToken, failing the test on an error.
func token(t tb, fence, serial, instance uint64) worklease.Token {
	t.Helper()
	tok, err := worklease.NewToken(fence, serial, instance)
	mustNoError(t, err, "NewToken(%d, %d, %d)", fence, serial, instance)
	return tok
}

// drainHints finishes the lease under tok with Succeed and then every
// offset the hints name, and returns the offsets in the order they were
// granted.
func (e *env) drainHints(d string, tok worklease.Token) []int64 {
	e.t.Helper()
	var got []int64
	for {
		res := e.succeed(d, tok)
		if res.Status == worklease.NoBacklog {
			return got
		}
		got = append(got, res.Next)
		tok = e.acquire(d, res.Next, worklease.Acquired).Token
	}
}

// snapshot returns what Inspect reports of each domain.
func (e *env) snapshot(domains ...string) map[string]worklease.DomainInfo {
	e.t.Helper()
	out := map[string]worklease.DomainInfo{}
	for _, d := range domains {
		out[d] = e.inspect(d)
	}
	return out
}
