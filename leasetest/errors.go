package leasetest

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/worklease/worklease"
)

// A backendCall is a call made on domain with offset where it takes one,
// returning only its error.
type backendCall struct {
	name    string
	feature Feature // the part of the contract it belongs to, if a backend may lack it
	call    func(ctx context.Context, b worklease.Backend, domain string, offset int64) error
}

// domainCalls are every call that takes a domain.
var domainCalls = []backendCall{
	{"TryAcquire", "", func(ctx context.Context, b worklease.Backend, d string, off int64) error {
		_, err := b.TryAcquire(ctx, d, off)
		return err
	}},
	{"Succeed", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.Succeed(ctx, d, worklease.Token{})
		return err
	}},
	{"SucceedNext", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.SucceedNext(ctx, d, worklease.Token{})
		return err
	}},
	{"Fail", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.Fail(ctx, d, worklease.Token{}, errors.New("x"))
		return err
	}},
	{"FailNext", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.FailNext(ctx, d, worklease.Token{}, errors.New("x"))
		return err
	}},
	{"Extend", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.Extend(ctx, d, worklease.Token{}, time.Second)
		return err
	}},
	{"Inspect", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.Inspect(ctx, d)
		return err
	}},
	{"Redrive", "", func(ctx context.Context, b worklease.Backend, d string, off int64) error {
		_, err := b.Redrive(ctx, d, off)
		return err
	}},
	{"Kill", "", func(ctx context.Context, b worklease.Backend, d string, off int64) error {
		_, err := b.Kill(ctx, d, off, "why")
		return err
	}},
	{"ForceRelease", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.ForceRelease(ctx, d)
		return err
	}},
	{"Pause", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error { return b.Pause(ctx, d) }},
	{"Resume", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.Resume(ctx, d)
		return err
	}},
	{"Forget", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error { return b.Forget(ctx, d) }},
	{"Enqueue", "", func(ctx context.Context, b worklease.Backend, d string, off int64) error {
		_, err := b.Enqueue(ctx, d, off, nil)
		return err
	}},
	{"Retry", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.Retry(ctx, d, worklease.Token{}, errors.New("x"), time.Second)
		return err
	}},
	{"EnqueueAt", FeatureEnqueueAt, func(ctx context.Context, b worklease.Backend, d string, off int64) error {
		_, err := b.EnqueueAt(ctx, d, off, nil, epoch.Add(time.Hour))
		return err
	}},
	{"Append", FeatureAppend, func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.Append(ctx, d, nil, worklease.AppendOptions{Key: "k"})
		return err
	}},
	{"Cancel", FeatureCancel, func(ctx context.Context, b worklease.Backend, d string, off int64) error {
		_, err := b.Cancel(ctx, d, off, true)
		return err
	}},
}

// allCalls are domainCalls and the calls that take no domain.
var allCalls = append([]backendCall{
	{"Leases", "", func(ctx context.Context, b worklease.Backend, _ string, _ int64) error {
		_, err := b.Leases(ctx)
		return err
	}},
	{"Domains", "", func(ctx context.Context, b worklease.Backend, _ string, _ int64) error {
		_, err := b.Domains(ctx)
		return err
	}},
	{"DeadLetters", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, err := b.DeadLetters(ctx, d)
		return err
	}},
	{"Reap", "", func(ctx context.Context, b worklease.Backend, _ string, _ int64) error {
		_, err := b.Reap(ctx)
		return err
	}},
	{"Claim", "", func(ctx context.Context, b worklease.Backend, _ string, _ int64) error {
		_, err := b.Claim(ctx, 1)
		return err
	}},
	{"WaitClaim", "", func(ctx context.Context, b worklease.Backend, _ string, _ int64) error {
		_, err := b.WaitClaim(ctx, 1, time.Millisecond)
		return err
	}},
	// SucceedMany's error is its own or, if it has none, its claim's: a
	// backend may answer a claim its batch left out as Succeed would, with
	// Succeed's error, the context's among them.
	{"SucceedMany", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		errs, err := b.SucceedMany(ctx, []worklease.Claim{{Domain: d}})
		return cmp.Or(err, errors.Join(errs...))
	}},
	{"ClaimNext", "", func(ctx context.Context, b worklease.Backend, d string, _ int64) error {
		_, errs, err := b.ClaimNext(ctx, []worklease.Claim{{Domain: d}})
		return cmp.Or(err, errors.Join(errs...))
	}},
}, domainCalls...)

// busy sets up the domains the error cases refuse calls on: "A" holds a
// lease on 1 with 2 queued, "idle" processed 1, "queued" is idle with 2
// queued, "failed" failed 1 (killed in flight). It returns the token of "A"'s lease.
func busy(e *env) worklease.Token {
	e.t.Helper()
	tok := e.acquire("A", 1, worklease.Acquired).Token
	e.acquire("A", 2, worklease.Enqueued)
	e.succeed("idle", e.acquire("idle", 1, worklease.Acquired).Token)
	q := e.acquire("queued", 1, worklease.Acquired).Token
	e.acquire("queued", 2, worklease.Enqueued)
	e.succeed("queued", q)
	e.acquire("failed", 1, worklease.Acquired)
	e.kill("failed", 1, "poison")
	return tok
}

func testErrors(t *testing.T, s *Suite) {
	long := tooLongDomain
	type errCase struct {
		name string
		opts []worklease.Option
		call func(e *env, tok worklease.Token) error
		want error
		// setup, if not nil, runs before the state is taken, and returns
		// the token to call with.
		setup func(e *env, tok worklease.Token) worklease.Token
	}
	cases := []errCase{
		{"SucceedUnknownDomain", nil, func(e *env, tok worklease.Token) error { _, err := e.b.Succeed(e.ctx, "nobody", tok); return err }, worklease.ErrNoLease, nil},
		{"FailUnknownDomain", nil, func(e *env, tok worklease.Token) error { _, err := e.b.Fail(e.ctx, "nobody", tok, nil); return err }, worklease.ErrNoLease, nil},
		{"ExtendUnknownDomain", nil, func(e *env, tok worklease.Token) error {
			_, err := e.b.Extend(e.ctx, "nobody", tok, time.Second)
			return err
		}, worklease.ErrNoLease, nil},
		{"SucceedIdleDomain", nil, func(e *env, tok worklease.Token) error { _, err := e.b.Succeed(e.ctx, "idle", tok); return err }, worklease.ErrNoLease, nil},
		{"FailNextIdleDomain", nil, func(e *env, tok worklease.Token) error { _, err := e.b.FailNext(e.ctx, "idle", tok, nil); return err }, worklease.ErrNoLease, nil},
		{"ForceReleaseIdle", nil, func(e *env, _ worklease.Token) error { _, err := e.b.ForceRelease(e.ctx, "idle"); return err }, worklease.ErrNoLease, nil},
		{"ForceReleaseUnknown", nil, func(e *env, _ worklease.Token) error { _, err := e.b.ForceRelease(e.ctx, "nobody"); return err }, worklease.ErrNoLease, nil},
		{"SucceedZeroToken", nil, func(e *env, _ worklease.Token) error {
			_, err := e.b.Succeed(e.ctx, "A", worklease.Token{})
			return err
		}, worklease.ErrTokenMismatch, nil},
		{"FailForgedToken", nil, func(e *env, tok worklease.Token) error {
			_, err := e.b.Fail(e.ctx, "A", token(e.t, tok.Fence()+1, tok.Serial(), tok.Instance()), nil)
			return err
		}, worklease.ErrTokenMismatch, nil},
		{"SucceedNextTokenOfOtherDomain", nil, func(e *env, other worklease.Token) error {
			_, err := e.b.SucceedNext(e.ctx, "A", other)
			return err
		}, worklease.ErrTokenMismatch, func(e *env, _ worklease.Token) worklease.Token {
			return e.acquire("B", 1, worklease.Acquired).Token
		}},
		{"ExtendForeignInstance", nil, func(e *env, tok worklease.Token) error {
			_, err := e.b.Extend(e.ctx, "A", token(e.t, tok.Fence(), tok.Serial(), tok.Instance()^1), time.Second)
			return err
		}, worklease.ErrTokenMismatch, nil},
		{"TryAcquireNegativeOffset", nil, func(e *env, _ worklease.Token) error { _, err := e.b.TryAcquire(e.ctx, "A", -1); return err }, worklease.ErrInvalidOffset, nil},
		{"TryAcquireMinOffsetUnknownDomain", nil, func(e *env, _ worklease.Token) error {
			_, err := e.b.TryAcquire(e.ctx, "nobody", -1<<63)
			return err
		}, worklease.ErrInvalidOffset, nil},
		{"RedriveNegativeOffsetUnknownDomain", nil, func(e *env, _ worklease.Token) error {
			_, err := e.b.Redrive(e.ctx, "nobody", -5)
			return err
		}, worklease.ErrInvalidOffset, nil},
		{"KillNegativeOffsetUnknownDomain", nil, func(e *env, _ worklease.Token) error {
			_, err := e.b.Kill(e.ctx, "nobody", -5, "x")
			return err
		}, worklease.ErrInvalidOffset, nil},
		{"ExtendChecksDomainBeforeDuration", nil, func(e *env, _ worklease.Token) error {
			_, err := e.b.Extend(e.ctx, "", worklease.Token{}, -time.Second)
			return err
		}, worklease.ErrInvalidDomain, nil},
		{"KillNegativeOffset", nil, func(e *env, _ worklease.Token) error { _, err := e.b.Kill(e.ctx, "A", -1, "x"); return err }, worklease.ErrInvalidOffset, nil},
		{"RedriveNegativeOffset", nil, func(e *env, _ worklease.Token) error { _, err := e.b.Redrive(e.ctx, "failed", -1); return err }, worklease.ErrInvalidOffset, nil},
		{"OutOfOrder", nil, func(e *env, _ worklease.Token) error { _, err := e.b.TryAcquire(e.ctx, "queued", 9); return err }, worklease.ErrBacklogOrder, nil},
		{"ExtendZero", nil, func(e *env, tok worklease.Token) error { _, err := e.b.Extend(e.ctx, "A", tok, 0); return err }, worklease.ErrInvalidDuration, nil},
		{"ExtendNegative", []worklease.Option{worklease.WithLeaseTTL(time.Minute)}, func(e *env, tok worklease.Token) error {
			_, err := e.b.Extend(e.ctx, "A", tok, -time.Second)
			return err
		}, worklease.ErrInvalidDuration, nil},
		{"RedriveProcessed", nil, func(e *env, _ worklease.Token) error { _, err := e.b.Redrive(e.ctx, "idle", 1); return err }, worklease.ErrNotDeadLettered, nil},
		{"RedriveInFlight", nil, func(e *env, _ worklease.Token) error { _, err := e.b.Redrive(e.ctx, "A", 1); return err }, worklease.ErrNotDeadLettered, nil},
		{"RedriveQueued", nil, func(e *env, _ worklease.Token) error { _, err := e.b.Redrive(e.ctx, "A", 2); return err }, worklease.ErrNotDeadLettered, nil},
		{"RedriveUnknown", nil, func(e *env, _ worklease.Token) error { _, err := e.b.Redrive(e.ctx, "nobody", 1); return err }, worklease.ErrNotDeadLettered, nil},
		{"KillProcessed", nil, func(e *env, _ worklease.Token) error { _, err := e.b.Kill(e.ctx, "idle", 1, "x"); return err }, worklease.ErrAlreadyProcessed, nil},
		{"KillAheadMonotonic", []worklease.Option{worklease.WithMonotonicOffsets()}, func(e *env, _ worklease.Token) error {
			_, err := e.b.Kill(e.ctx, "idle", 7, "typo")
			return err
		}, worklease.ErrOffsetAhead, nil},
		{"KillUnknownDomainMonotonic", []worklease.Option{worklease.WithMonotonicOffsets()}, func(e *env, _ worklease.Token) error {
			_, err := e.b.Kill(e.ctx, "nobody", 0, "typo")
			return err
		}, worklease.ErrOffsetAhead, nil},
		{"KillBelowHighWaterMonotonic", []worklease.Option{worklease.WithMonotonicOffsets()}, func(e *env, _ worklease.Token) error {
			_, err := e.b.Kill(e.ctx, "idle", 3, "x")
			return err
		}, worklease.ErrAlreadyProcessed, func(e *env, tok worklease.Token) worklease.Token {
			e.succeed("idle", e.acquire("idle", 5, worklease.Acquired).Token)
			return tok
		}},
		{"ForgetLeased", nil, func(e *env, _ worklease.Token) error { return e.b.Forget(e.ctx, "A") }, worklease.ErrDomainBusy, nil},
		{"ForgetBacklog", nil, func(e *env, _ worklease.Token) error { return e.b.Forget(e.ctx, "queued") }, worklease.ErrDomainBusy, nil},
		{"ForgetPaused", nil, func(e *env, _ worklease.Token) error {
			return e.b.Forget(e.ctx, "idle")
		}, worklease.ErrDomainBusy, func(e *env, tok worklease.Token) worklease.Token {
			e.pause("idle")
			return tok
		}},
		{"SucceedRevoked", nil, func(e *env, tok worklease.Token) error {
			_, err := e.b.Succeed(e.ctx, "A", tok)
			return err
		}, worklease.ErrLeaseRevoked, func(e *env, tok worklease.Token) worklease.Token {
			e.forceRelease("A")
			return tok
		}},
		{"ExtendKilled", nil, func(e *env, tok worklease.Token) error {
			_, err := e.b.Extend(e.ctx, "A", tok, time.Second)
			return err
		}, worklease.ErrLeaseRevoked, func(e *env, tok worklease.Token) worklease.Token {
			e.kill("A", 1, "stuck")
			return tok
		}},
		{"FailExpired", []worklease.Option{worklease.WithLeaseTTL(time.Minute)}, func(e *env, tok worklease.Token) error {
			_, err := e.b.Fail(e.ctx, "A", tok, nil)
			return err
		}, worklease.ErrLeaseExpired, func(e *env, tok worklease.Token) worklease.Token {
			e.clk.Advance(time.Minute)
			e.reap()
			return tok
		}},
		{"SucceedNextExpiredLeasedAgain", []worklease.Option{worklease.WithLeaseTTL(time.Minute)}, func(e *env, tok worklease.Token) error {
			_, err := e.b.SucceedNext(e.ctx, "A", tok)
			return err
		}, worklease.ErrLeaseExpired, func(e *env, tok worklease.Token) worklease.Token {
			e.clk.Advance(time.Minute)
			e.acquire("A", 1, worklease.Acquired) // the expired offset, back at the front
			return tok
		}},
	}
	for _, c := range domainCalls {
		for _, d := range []string{"", long} {
			for _, off := range []int64{1, -5} {
				name := "InvalidDomain/" + c.name
				if d != "" {
					name += "Long"
				}
				if off < 0 {
					name += "NegativeOffset" // the domain is checked first
				}
				cases = append(cases, errCase{name, nil, func(e *env, _ worklease.Token) error {
					e.s.need(e.t, c.feature)
					return c.call(e.ctx, e.b, d, off)
				}, worklease.ErrInvalidDomain, nil})
			}
		}
	}
	cases = append(cases, errCase{"InvalidDomain/DeadLettersLong", nil, func(e *env, _ worklease.Token) error {
		_, err := e.b.DeadLetters(e.ctx, long)
		return err
	}, worklease.ErrInvalidDomain, nil})

	var tcs []testCase
	for _, c := range cases {
		tcs = append(tcs, testCase{c.name, func(t *testing.T, s *Suite) {
			e := s.start(t, c.opts...)
			tok := busy(e)
			if c.setup != nil {
				tok = c.setup(e, tok)
			}
			e.refused(c.want, func() error { return c.call(e, tok) }, "nobody", "B")
		}})
	}
	tcs = append(tcs,
		testCase{"BacklogOrderError", func(t *testing.T, s *Suite) {
			e := s.start(t)
			busy(e)
			_, err := e.b.TryAcquire(e.ctx, "queued", 9)
			var boe *worklease.BacklogOrderError
			mustTrue(t, errors.As(err, &boe), "TryAcquire: %v is no *BacklogOrderError", err)
			mustEqual(t, worklease.BacklogOrderError{Domain: "queued", Expected: 2, Got: 9}, *boe)
		}},
		testCase{"Closed", testClosed},
		testCase{"LongCauseCut", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			long := strings.Repeat("x", worklease.MaxCauseLen-1) + "éé"
			e.fail("A", e.acquire("A", 1, worklease.Acquired).Token, errors.New(long))
			e.kill("A", 2, long)
			dls := e.deadLetters("A")
			mustEqual(t, 2, len(dls), "dead letters")
			for _, dl := range dls {
				mustTrue(t, dl.Cause != nil, "offset %d: no cause", dl.Offset)
				text := dl.Cause.Error()
				mustEqual(t, long[:worklease.MaxCauseLen-1], text, "offset %d: cause cut at a rune boundary", dl.Offset)
				mustTrue(t, utf8.ValidString(text), "offset %d: cause is not valid UTF-8", dl.Offset)
			}
		}},
		testCase{"EmptyCauseIsNoCause", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMaxRetries(0))
			e.fail("A", e.acquire("A", 1, worklease.Acquired).Token, errors.New(""))
			e.fail("A", e.acquire("A", 2, worklease.Acquired).Token, nil)
			e.kill("A", 3, "")
			for _, dl := range e.deadLetters("A") {
				mustTrue(t, dl.Cause == nil, "offset %d: cause %v, want none", dl.Offset, dl.Cause)
			}
		}},
		testCase{"TokenCheckOrder", func(t *testing.T, s *Suite) {
			// Only the latest revoked token learns why; an older one is
			// any stale token.
			e := s.start(t, worklease.WithLeaseTTL(10*time.Second))
			t1 := e.acquire("A", 1, worklease.Acquired).Token
			e.clk.Advance(10 * time.Second)
			t2 := e.acquire("A", 1, worklease.Acquired).Token // revokes t1 first
			_, err := e.b.Succeed(e.ctx, "A", t1)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "the latest revoked token, leased again")
			e.forceRelease("A")
			_, err = e.b.Succeed(e.ctx, "A", t2)
			mustSentinel(t, worklease.ErrLeaseRevoked, err, "the latest revoked token, idle")
			_, err = e.b.Succeed(e.ctx, "A", t1)
			mustSentinel(t, worklease.ErrNoLease, err, "an older revoked token, idle")
			e.acquire("A", 1, worklease.Acquired)
			_, err = e.b.Extend(e.ctx, "A", t1, time.Second)
			mustSentinel(t, worklease.ErrTokenMismatch, err, "an older revoked token, leased again")
			_, err = e.b.Fail(e.ctx, "A", t2, nil)
			mustSentinel(t, worklease.ErrLeaseRevoked, err, "the latest revoked token, leased again")
		}},
	)
	runCases(t, s, tcs)
}

// testClosed checks that every call after Close returns an error matching
// ErrClosed.
func testClosed(t *testing.T, s *Suite) {
	e := s.start(t)
	tok := busy(e)
	mustNoError(t, e.b.Close(), "Close")
	for _, c := range allCalls {
		if s.lacks(c.feature) {
			t.Logf("%s not called: the backend lacks %s yet (Suite.Lacks)", c.name, c.feature)
			continue
		}
		mustErrorIs(t, c.call(e.ctx, e.b, "A", 1), worklease.ErrClosed, "%s after Close", c.name)
	}
	for _, c := range domainCalls { // the backend is open is checked first
		if s.lacks(c.feature) {
			continue
		}
		mustErrorIs(t, c.call(e.ctx, e.b, "", -5), worklease.ErrClosed, "%s with an invalid domain after Close", c.name)
	}
	_, err := e.b.Succeed(e.ctx, "A", tok)
	mustErrorIs(t, err, worklease.ErrClosed, "Succeed with the lease's token after Close")
	mustErrorIs(t, e.b.Close(), worklease.ErrClosed, "Close after Close")
	if s.Reopen != nil {
		e.reopen()
		info := e.inspect("A")
		mustTrue(t, info.Leased && info.Lease.Token == tok, "the lease of A after Close and a restart: %+v", info)
	}
}
