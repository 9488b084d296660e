package leasetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/worklease/worklease"
)

// The model test drives a backend and a plain model of its documented
// contract side by side, and after every step checks that they agree and
// that the model satisfies the contract's invariants.
//
// Each run draws a configuration. A quarter of the runs are the core
// contract: no option but WithMaxRetries, and only its calls (TryAcquire,
// Succeed, Fail, Inspect). The others draw a lease TTL (none or modelTTL),
// FIFO or LIFO ordering, best-effort ordering, parking on dead letters,
// monotonic offsets and an observer (if the backend reports events), and
// add SucceedNext, FailNext, Extend, Reap, the admin calls and, if the
// backend can be reopened, restarts; half of them add the pull calls
// (Enqueue, Claim, Retry, SucceedMany; see model_pull.go). The model is
// written from the godoc of each call.
//
// TryAcquire, Kill and Pause, the calls that create a domain, draw their
// domain from modelLeasedDomains only, so "z" is never created: the other
// calls on it exercise the paths for a domain the backend has never seen.
// Offsets come from a small range so that they collide.
var (
	modelLeasedDomains = []string{"a", "b", "c"}
	modelAllDomains    = []string{"a", "b", "c", "z"} // sorted, as Leases, DeadLetters and Reap order them
)

const (
	maxModelOffset = 6
	modelTTL       = 10 * time.Second
)

var (
	// modelLongDomain is one byte too long for a domain.
	modelLongDomain = tooLongDomain
	// modelLongCause is a cause too long to keep whole, whose rune that
	// crosses MaxCauseLen must go whole.
	modelLongCause = strings.Repeat("x", worklease.MaxCauseLen-1) + "éé"
)

// modelKeptCause is the cause a backend keeps for cause, as MaxCauseLen
// says: its text cut to at most MaxCauseLen bytes without splitting a rune.
func modelKeptCause(cause error) error {
	if cause == nil || len(cause.Error()) <= worklease.MaxCauseLen {
		return cause
	}
	var b strings.Builder
	for _, r := range cause.Error() {
		if b.Len()+len(string(r)) > worklease.MaxCauseLen {
			break
		}
		b.WriteRune(r)
	}
	return errors.New(b.String())
}

// testModel is the Model area: the model test, run for as many cases as
// rapid's flags (-rapid.checks) or RAPID_CHECKS ask.
func testModel(t *testing.T, s *Suite) {
	rapid.Check(t, func(rt *rapid.T) { runModel(t, rt, s) })
}

// Fuzz runs the model test of Run as a fuzz target: each input is read as
// the choices of one case. Call it from a backend's fuzz test:
//
//	func FuzzBackend(f *testing.F) { leasetest.Fuzz(f, suite) }
func Fuzz(f *testing.F, s Suite) {
	if s.New == nil {
		f.Fatal("leasetest: Suite.New is nil")
	}
	// rapid reads the input as a stream of 64-bit words. All zeros is the
	// smallest case; the random inputs give the fuzzer longer cases to
	// mutate. An input that runs out of words mid-case is skipped, not
	// failed.
	f.Add(make([]byte, 64))
	for i := range uint64(4) {
		rng := rand.New(rand.NewPCG(i, 0x5eed))
		b := make([]byte, 4096)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rapid.MakeFuzz(func(rt *rapid.T) { runModel(t, rt, &s) })(t, data)
	})
}

// modelConfig is one run's configuration.
type modelConfig struct {
	maxRetries int
	// extended: the options below are drawn, and the calls beyond the
	// core contract's are made. Otherwise the backend has the core
	// configuration and only the core calls are made.
	extended   bool
	ttl        time.Duration // 0: leases never expire
	lifo       bool
	bestEffort bool
	park       bool
	monotonic  bool // WithMonotonicOffsets: processed is a watermark
	observe    bool
	pull       bool          // the pull calls are made too, as often as the others together
	window     time.Duration // WithKeyWindow; 0: the default
}

// keyWindow is how long Append keeps a key.
func (c *modelConfig) keyWindow() time.Duration {
	if c.window == 0 {
		return worklease.DefaultKeyWindow
	}
	return c.window
}

func drawModelConfig(t *rapid.T, s *Suite) modelConfig {
	c := modelConfig{maxRetries: rapid.IntRange(0, 3).Draw(t, "maxRetries")}
	// Shrinking goes towards 0, the core configuration.
	if rapid.IntRange(0, 3).Draw(t, "extended") == 0 {
		return c
	}
	c.extended = true
	c.ttl = rapid.SampledFrom([]time.Duration{0, modelTTL}).Draw(t, "ttl")
	c.lifo = rapid.Bool().Draw(t, "lifo")
	c.bestEffort = rapid.Bool().Draw(t, "bestEffort")
	c.park = rapid.Bool().Draw(t, "park")
	c.observe = s.Events && rapid.Bool().Draw(t, "observe")
	c.monotonic = rapid.Bool().Draw(t, "monotonic")
	c.pull = rapid.Bool().Draw(t, "pull")
	c.window = rapid.SampledFrom([]time.Duration{0, modelTTL}).Draw(t, "keyWindow")
	return c
}

func (c *modelConfig) options(clk worklease.Clock, obs worklease.Observer) []worklease.Option {
	opts := []worklease.Option{worklease.WithClock(clk), worklease.WithMaxRetries(c.maxRetries)}
	if !c.extended {
		return opts
	}
	if c.ttl > 0 {
		opts = append(opts, worklease.WithLeaseTTL(c.ttl))
	}
	if c.lifo {
		opts = append(opts, worklease.WithOrdering(worklease.LIFO))
	}
	if c.bestEffort {
		opts = append(opts, worklease.WithBestEffortOrdering())
	}
	if c.park {
		opts = append(opts, worklease.WithParkOnDeadLetter())
	}
	if c.monotonic {
		opts = append(opts, worklease.WithMonotonicOffsets())
	}
	if c.observe {
		opts = append(opts, worklease.WithObserver(obs))
	}
	if c.window != 0 {
		opts = append(opts, worklease.WithKeyWindow(c.window))
	}
	return opts
}

// recorder is an Observer that records the events of each domain, in
// order.
type recorder struct {
	mu     sync.Mutex // guards events
	events map[string][]worklease.Event
}

func (o *recorder) Observe(e worklease.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.events == nil {
		o.events = map[string][]worklease.Event{}
	}
	o.events[e.Domain] = append(o.events[e.Domain], e)
}

func (o *recorder) domains() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.events))
}

func (o *recorder) of(domain string) []worklease.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events[domain])
}

// kinds returns the kinds of domain's events, in order.
func (o *recorder) kinds(domain string) []worklease.EventKind {
	var ks []worklease.EventKind
	for _, e := range o.of(domain) {
		ks = append(ks, e.Kind)
	}
	return ks
}

// runModel is one case of the model test. New and Reopen get t; the
// backends are closed when the case ends.
func runModel(outer *testing.T, t *rapid.T, suite *Suite) {
	cfg := drawModelConfig(t, suite)
	clk := NewClock(time.Unix(1_700_000_000, 0).UTC())
	obs := &recorder{}
	opts := cfg.options(clk, obs)
	b := suite.New(outer, opts...)
	check(t, b != nil, "leasetest: Suite.New returned nil")
	s := &modelTest{suite: suite, outer: outer, ctx: context.Background(), b: b, opts: opts, clk: clk, model: newLeaseModel(&cfg)}
	t.Cleanup(func() {
		s.b.Close()
		if s.other != nil {
			s.other.Close()
		}
	})
	if cfg.observe {
		s.obs = obs
	}
	leased := rapid.SampledFrom(modelLeasedDomains)
	anyDomain := rapid.SampledFrom(modelAllDomains)
	offset := rapid.Int64Range(0, maxModelOffset)
	burstOffset := rapid.OneOf(rapid.Int64Range(0, 3*maxModelOffset), rapid.Int64Range(0, 3*maxModelOffset),
		rapid.Int64Range(0, 3*maxModelOffset), rapid.Int64Range(math.MaxInt64-2, math.MaxInt64))
	negative := rapid.OneOf(rapid.Just(int64(-1)), rapid.Just(int64(math.MinInt64)), rapid.Int64Range(math.MinInt64, -1))
	// Whole seconds make a lease expire exactly at its deadline often.
	advance := rapid.OneOf(
		rapid.Map(rapid.Int64Range(0, 15), func(s int64) time.Duration { return time.Duration(s) * time.Second }),
		rapid.Map(rapid.Int64Range(0, 15_000), func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }))
	extendSeconds := rapid.Map(rapid.Int64Range(1, 20), func(s int64) time.Duration { return time.Duration(s) * time.Second })
	extendBy := rapid.OneOf(rapid.SampledFrom([]time.Duration{-time.Second, 0}), extendSeconds, extendSeconds, extendSeconds)
	reason := rapid.SampledFrom([]string{"poison", "operator", "", modelLongCause})
	causes := rapid.SampledFrom([]error{nil, errors.New("attempt failed"), errors.New(""), errors.New(modelLongCause)})

	var calls []backendCall // those InvalidDomain makes: not those the backend lacks
	for _, c := range domainCalls {
		if !suite.lacks(c.feature) {
			calls = append(calls, c)
		}
	}
	actions := map[string]func(*rapid.T){
		"TryAcquire": func(t *rapid.T) {
			s.tryAcquire(t, leased.Draw(t, "domain"), offset.Draw(t, "offset"))
		},
		// TryAcquireHead asks for the offset the domain grants next when
		// there is one, as an orchestrator following a hint does; plain
		// TryAcquire finds it only by chance.
		"TryAcquireHead": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			off := offset.Draw(t, "offset")
			if head, ok := s.model.domains[d].headAfterTouch(s.clk.Now()); ok {
				off = head
			}
			s.tryAcquire(t, d, off)
		},
		// Burst queues many offsets at once, so that backlogs grow long,
		// and now and then offsets at the top of the range, where an
		// off-by-one overflows.
		"Burst": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			n := rapid.IntRange(1, 12).Draw(t, "n")
			for range n {
				s.tryAcquire(t, d, burstOffset.Draw(t, "offset"))
			}
		},
		"TryAcquireNegative": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			off := negative.Draw(t, "offset")
			before := s.before(t, d, s.model.domains[d].due(s.clk.Now()), false, worklease.ErrInvalidOffset)
			got, err := s.b.TryAcquire(s.ctx, d, off)
			mustSentinel(t, worklease.ErrInvalidOffset, err, "TryAcquire(%q, %d)", d, off)
			mustZero(t, got)
			s.requireUnchanged(t, d, before)
		},
		"Succeed": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			s.succeed(t, d, s.drawToken(t, d))
		},
		"Fail": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			tok := s.drawToken(t, d)
			s.fail(t, d, tok, causes.Draw(t, "cause"))
		},
		// SucceedCurrent and FailCurrent finish the lease in flight, so
		// that runs reach deep states instead of mostly bouncing off the
		// token check.
		"SucceedCurrent": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			s.succeed(t, d, s.model.domains[d].lease.token)
		},
		"FailCurrent": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			s.fail(t, d, s.model.domains[d].lease.token, nil)
		},
		"Advance": func(t *rapid.T) {
			s.clk.Advance(advance.Draw(t, "by"))
		},
		"Inspect": func(t *rapid.T) {
			s.inspect(t, anyDomain.Draw(t, "domain"))
		},
		// InvalidDomain makes any call on a domain no call accepts, with
		// any offset: it is refused with ErrInvalidDomain, first, and
		// changes nothing, which the "" check confirms (no domain, no
		// event).
		"InvalidDomain": func(t *rapid.T) {
			d := rapid.SampledFrom([]string{"", modelLongDomain}).Draw(t, "domain")
			off := rapid.OneOf(offset, negative).Draw(t, "offset")
			c := rapid.SampledFrom(calls).Draw(t, "call")
			mustSentinel(t, worklease.ErrInvalidDomain, c.call(s.ctx, s.b, d, off), "%s(%.8q…, %d)", c.name, d, off)
			if d != "" {
				_, err := s.b.DeadLetters(s.ctx, d)
				mustSentinel(t, worklease.ErrInvalidDomain, err, "DeadLetters(%.8q…)", d)
			}
		},
		"": s.check,
	}
	if cfg.ttl > 0 {
		// AdvanceToExpiry moves the clock to just before, exactly at or
		// just after a lease's deadline, which plain Advance hits only
		// by chance.
		actions["AdvanceToExpiry"] = func(t *rapid.T) {
			now := s.clk.Now()
			var deadlines []time.Time
			for _, d := range modelAllDomains {
				if md := s.model.domains[d]; md.leased && now.Before(md.lease.expiresAt) {
					deadlines = append(deadlines, md.lease.expiresAt)
				}
			}
			if len(deadlines) == 0 {
				s.clk.Advance(advance.Draw(t, "by"))
				return
			}
			at := rapid.SampledFrom(deadlines).Draw(t, "deadline")
			at = at.Add(rapid.SampledFrom([]time.Duration{0, -time.Millisecond, time.Millisecond}).Draw(t, "delta"))
			if at.After(now) {
				s.clk.Advance(at.Sub(now))
			}
		}
	}
	if cfg.extended && suite.Reopen != nil {
		// Restart closes the backend and reopens its durable state, which
		// must be the state it had: the model carries on unchanged, but
		// for what a restart may lose of the ready domains' order.
		actions["Restart"] = func(t *rapid.T) {
			s.b = suite.Reopen(outer, s.b, s.opts...)
			check(t, s.b != nil, "leasetest: Suite.Reopen returned nil")
			s.model.restarted()
		}
	}
	if cfg.extended {
		maps.Copy(actions, map[string]func(*rapid.T){
			"Extend": func(t *rapid.T) {
				d := anyDomain.Draw(t, "domain")
				s.extend(t, d, s.drawToken(t, d), extendBy.Draw(t, "by"))
			},
			// ExtendMany extends up to three leases, in flight or not, by
			// one duration.
			"ExtendMany": func(t *rapid.T) {
				claims := s.drawClaims(t, rapid.Bool().Draw(t, "current"))
				s.extendMany(t, claims, extendBy.Draw(t, "by"))
			},
			// ExtendCurrent extends the lease in flight, now and then to
			// exactly its current deadline, which must change nothing.
			"ExtendCurrent": func(t *rapid.T) {
				d := leased.Draw(t, "domain")
				md := s.model.domains[d]
				by := extendBy.Draw(t, "by")
				if left := md.lease.expiresAt.Sub(s.clk.Now()); md.leased && left > 0 && rapid.IntRange(0, 3).Draw(t, "toDeadline") == 0 {
					by = left
				}
				s.extend(t, d, md.lease.token, by)
			},
			"Reap": s.reap,
			"Kill": func(t *rapid.T) {
				d := leased.Draw(t, "domain")
				s.kill(t, d, s.drawKnownOffset(t, d), reason.Draw(t, "reason"))
			},
			"KillNegative": func(t *rapid.T) {
				d := anyDomain.Draw(t, "domain")
				s.kill(t, d, negative.Draw(t, "offset"), reason.Draw(t, "reason"))
			},
			"RedriveNegative": func(t *rapid.T) {
				s.redrive(t, anyDomain.Draw(t, "domain"), negative.Draw(t, "offset"))
			},
			"Redrive": func(t *rapid.T) {
				d := anyDomain.Draw(t, "domain")
				off := s.drawKnownOffset(t, d)
				if failed := s.model.domains[d].failed; len(failed) > 0 && rapid.IntRange(0, 3).Draw(t, "pickFailed") > 0 {
					off = rapid.SampledFrom(slices.Sorted(maps.Keys(failed))).Draw(t, "failedOffset")
				}
				s.redrive(t, d, off)
			},
			"ForceRelease": func(t *rapid.T) {
				s.forceRelease(t, anyDomain.Draw(t, "domain"))
			},
			"Pause": func(t *rapid.T) {
				s.pause(t, leased.Draw(t, "domain"))
			},
			"Resume": func(t *rapid.T) {
				s.resume(t, anyDomain.Draw(t, "domain"))
			},
			"Forget": func(t *rapid.T) {
				s.forget(t, anyDomain.Draw(t, "domain"))
			},
			"SucceedNext": func(t *rapid.T) {
				d := anyDomain.Draw(t, "domain")
				s.succeedNext(t, d, s.drawToken(t, d))
			},
			"FailNext": func(t *rapid.T) {
				d := anyDomain.Draw(t, "domain")
				tok := s.drawToken(t, d)
				cause := rapid.SampledFrom([]error{nil, errors.New("attempt failed")}).Draw(t, "cause")
				s.failNext(t, d, tok, cause)
			},
			// SucceedNextCurrent and FailNextCurrent drive a domain as a
			// worker that never calls TryAcquire for a queued offset does.
			"SucceedNextCurrent": func(t *rapid.T) {
				d := leased.Draw(t, "domain")
				s.succeedNext(t, d, s.model.domains[d].lease.token)
			},
			"FailNextCurrent": func(t *rapid.T) {
				d := leased.Draw(t, "domain")
				s.failNext(t, d, s.model.domains[d].lease.token, nil)
			},
		})
	}
	if cfg.pull {
		// Each pull action goes in under several names, so that runs
		// reach the states that take a few pull calls in a row.
		for name, act := range s.pullActions(leased, anyDomain, offset) {
			for i := range 3 {
				actions[fmt.Sprintf("%s#%d", name, i)] = act
			}
		}
	}
	t.Repeat(actions)
}

// A modelLease is a lease in flight, as the model keeps it.
type modelLease struct {
	offset     int64
	token      worklease.Token
	acquiredAt time.Time
	expiresAt  time.Time // zero: never
	retries    int
	attempts   int // made, this one included: retries+1, plus any force-released
}

// A modelAttempt is what an offset put back in the backlog by an expiry or
// ForceRelease carries to its next grant.
type modelAttempt struct {
	attempts   int // made, the last one included
	retries    int // failed: an expiry is one, a forced release is not
	acquiredAt time.Time
}

type modelDeadLetter struct {
	cause    error
	attempts int
	at       time.Time
}

// A modelEvent is an Event the backend must report, without its domain.
type modelEvent struct {
	kind    worklease.EventKind
	offset  int64
	attempt int
	token   worklease.Token
	cause   error
	at      time.Time
	// enqueued: the offset was queued on an idle, running domain, which
	// Enqueue does, and TryAcquire when the backlog's head is scheduled
	// for later. (The model's own; no Event says so.)
	enqueued bool
}

// A modelDomain is one domain as the godoc describes it, written as plainly
// as possible, plus the history that the invariants about the past need.
type modelDomain struct {
	cfg *modelConfig

	// The core state. processed holds the offsets that succeeded, with
	// or without WithMonotonicOffsets; isProcessed says which offsets count
	// as processed.
	leased    bool
	lease     modelLease // zero unless leased
	processed map[int64]bool
	failed    map[int64]modelDeadLetter
	backlog   []int64 // head first
	hw        int64   // the highest terminal offset since the record was made; -1: none

	// The optional behaviour's.
	paused     bool
	carried    map[int64]modelAttempt // queued offsets whose attempts carry over
	revoked    worklease.Token        // the latest lease that ended without its holder
	revokedErr error                  // and why: ErrLeaseExpired or ErrLeaseRevoked

	// The pull calls' and the producers'.
	payloads  map[int64]string    // what Enqueue stored with an offset, until it succeeds
	scheduled map[int64]time.Time // queued offsets not to be granted before a time
	retryAt   time.Time           // when the retry delay of the backlog's head ends; zero: none
	keys      map[string]modelKey // Append's idempotency keys
	cancelled map[int64]bool      // offsets cancelled, which count as processed without a grant
	ready     modelReady          // the domain's place among those Claim may lease
	// streak counts the leases ClaimNext granted in a row since a claim;
	// streakUnsure: the backend's may be higher (see modelDomain.claimNext).
	streak       int
	streakUnsure bool
	// chainedFrom is the token of the lease ClaimNext ended as it granted
	// the one in flight, zero if another call granted that; ClaimNext
	// repeated with it answers with the lease in flight again.
	// chainedUnsure: a restart since may have made the backend forget it.
	chainedFrom   worklease.Token
	chainedUnsure bool

	// History.
	created  bool              // the backend knows the domain (TryAcquire, Kill or Pause made it; Forget drops it)
	grants   []worklease.Token // the token of every grant, in order, across Forgets
	granted  []int64           // the offset of every grant since the record was created
	events   []modelEvent      // every event, in order, across Forgets
	replay   modelReplay       // the current record's history, replayed from events
	replayed int               // events replayed so far
	observed int               // events compared with the observer's so far
}

func newModelDomain(cfg *modelConfig) *modelDomain {
	md := &modelDomain{cfg: cfg}
	md.reset()
	return md
}

// reset gives md a fresh record's state, keeping the history that outlives
// a Forget.
func (md *modelDomain) reset() {
	md.leased, md.lease, md.paused = false, modelLease{}, false
	md.processed, md.failed, md.backlog, md.carried = map[int64]bool{}, map[int64]modelDeadLetter{}, nil, map[int64]modelAttempt{}
	md.hw = -1
	md.revoked, md.revokedErr = worklease.Token{}, nil
	md.created, md.granted = false, nil
	md.payloads, md.scheduled, md.retryAt, md.keys, md.ready = map[int64]string{}, map[int64]time.Time{}, time.Time{}, map[string]modelKey{}, modelReady{}
	md.cancelled = map[int64]bool{}
	md.streakUnsure = md.streakUnsure || md.streak > 0 // Forget may or may not end a streak
	md.streak = 0
}

// A leaseModel is the whole backend: plain maps and slices, no locks.
type leaseModel struct {
	cfg     *modelConfig
	domains map[string]*modelDomain
	issued  map[worklease.Token]string // every token ever granted, to its domain
	grants  int                        // number of Acquired results, in all domains
	// pulling: a pull call (Enqueue, Claim, Retry) was made since the
	// backend started or restarted; see modelReady.
	pulling bool
}

func newLeaseModel(cfg *modelConfig) *leaseModel {
	l := &leaseModel{cfg: cfg, domains: map[string]*modelDomain{}, issued: map[worklease.Token]string{}}
	for _, d := range modelAllDomains {
		l.domains[d] = newModelDomain(cfg)
	}
	return l
}

func (md *modelDomain) emit(kind worklease.EventKind, offset int64, attempt int, tok worklease.Token, cause error, now time.Time) {
	md.events = append(md.events, modelEvent{kind: kind, offset: offset, attempt: attempt, token: tok, cause: cause, at: now})
}

// due reports whether the lease has run out of time but is not revoked yet.
func (md *modelDomain) due(now time.Time) bool {
	return md.leased && !md.lease.expiresAt.IsZero() && !now.Before(md.lease.expiresAt)
}

// touch is what every call on the domain does first: it revokes the lease
// if its time has run out. The expiry counts as a failed attempt.
func (md *modelDomain) touch(now time.Time) bool {
	if !md.due(now) {
		return false
	}
	l := md.lease
	md.emit(worklease.EventExpired, l.offset, l.attempts, l.token, nil, now)
	md.endLease(l.token, worklease.ErrLeaseExpired)
	if l.retries < md.cfg.maxRetries {
		md.requeue(l.offset, modelAttempt{attempts: l.attempts, retries: l.retries + 1, acquiredAt: l.acquiredAt}, now)
	} else {
		md.deadLetter(l.offset, l.attempts, l.token, worklease.ErrLeaseExpired, now, md.cfg.park)
	}
	return true
}

// headAfterTouch returns the offset the domain's backlog will start with
// once the next call has revoked an expired lease.
func (md *modelDomain) headAfterTouch(now time.Time) (int64, bool) {
	if md.due(now) && md.lease.retries < md.cfg.maxRetries {
		return md.lease.offset, true
	}
	if len(md.backlog) > 0 {
		return md.backlog[0], true
	}
	return 0, false
}

func (md *modelDomain) endLease(tok worklease.Token, why error) {
	md.revoked, md.revokedErr = tok, why
	md.leased, md.lease = false, modelLease{}
}

// requeue puts off at the front of the backlog with the attempts it made.
func (md *modelDomain) requeue(off int64, a modelAttempt, now time.Time) {
	md.backlog = slices.Insert(md.backlog, 0, off)
	md.carried[off] = a
	md.emit(worklease.EventRequeued, off, a.attempts, worklease.Token{}, nil, now)
}

func (md *modelDomain) deadLetter(off int64, attempts int, tok worklease.Token, cause error, now time.Time, park bool) {
	kept := cause
	if cause != nil && cause.Error() == "" {
		kept = nil // DeadLetter.Cause: a cause with no text is none
	}
	md.failed[off] = modelDeadLetter{cause: kept, attempts: attempts, at: now}
	md.hw = max(md.hw, off)
	md.emit(worklease.EventDeadLettered, off, attempts, tok, cause, now)
	if park && !md.paused {
		md.paused = true
		md.retryAt = time.Time{}
		md.emit(worklease.EventPaused, off, 0, worklease.Token{}, cause, now)
	}
}

// isProcessed reports whether off counts as processed, as WithMonotonicOffsets
// and the core contract define it: it succeeded; or, with the option, it is at or
// below the highest terminal offset and neither failed, queued nor in
// flight.
func (md *modelDomain) isProcessed(off int64) bool {
	if !md.cfg.monotonic {
		return md.processed[off]
	}
	return off <= md.hw && !modelHas(md.failed, off) && !slices.Contains(md.backlog, off) && !(md.leased && md.lease.offset == off)
}

// processedCount is Inspect's Processed: with WithMonotonicOffsets, hw+1
// less the failed, queued and leased offsets at or below hw, at most
// math.MaxInt64.
func (md *modelDomain) processedCount() int64 {
	if !md.cfg.monotonic {
		return int64(len(md.processed))
	}
	if md.hw < 0 {
		return 0
	}
	var pending int64
	for off := range md.failed {
		if off <= md.hw {
			pending++
		}
	}
	for _, off := range md.backlog {
		if off <= md.hw {
			pending++
		}
	}
	if md.leased && md.lease.offset <= md.hw {
		pending++
	}
	if pending == 0 && md.hw == math.MaxInt64 {
		return math.MaxInt64
	}
	return md.hw - pending + 1
}

// next is the offset an idle, running domain grants next at now, which
// admin calls and Reap report: none while its head is scheduled for later.
func (md *modelDomain) next(now time.Time) (int64, bool) {
	if md.leased || md.paused || len(md.backlog) == 0 || md.headWaits(now) {
		return 0, false
	}
	return md.backlog[0], true
}

// unqueue takes the i-th offset out of the backlog, with what it carried
// and its schedule, and the retry delay with it if it was the head.
func (md *modelDomain) unqueue(i int) {
	off := md.backlog[i]
	md.backlog = slices.Delete(slices.Clone(md.backlog), i, i+1)
	delete(md.carried, off)
	delete(md.scheduled, off)
	if i == 0 {
		md.retryAt = time.Time{}
	}
}

// hint returns the backlog's head, if any.
func (md *modelDomain) hint() (int64, bool) {
	if len(md.backlog) == 0 {
		return 0, false
	}
	return md.backlog[0], true
}

func (l *modelLease) result(st worklease.AcquireStatus) worklease.AcquireResult {
	return worklease.AcquireResult{Status: st, Token: l.token, AcquiredAt: l.acquiredAt, ExpiresAt: l.expiresAt, RetryCount: l.retries}
}

// acquire is TryAcquire on the model. On Acquired the model cannot know the
// new token: the result carries a zero Token, and the caller records the
// real one with grant. The model changes only when the error is nil.
func (md *modelDomain) acquire(domain string, off int64, now time.Time) (worklease.AcquireResult, error) {
	md.created = true
	md.touch(now)
	switch {
	case md.isProcessed(off):
		return worklease.AcquireResult{Status: worklease.AlreadyProcessed}, nil
	case modelHas(md.failed, off):
		return worklease.AcquireResult{Status: worklease.AlreadyFailed}, nil
	case md.leased && off == md.lease.offset:
		return md.lease.result(worklease.AlreadyAcquired), nil
	case md.leased || md.paused || md.headWaits(now):
		if !slices.Contains(md.backlog, off) {
			if md.cfg.lifo {
				md.backlog = slices.Insert(md.backlog, 0, off)
			} else {
				md.backlog = append(md.backlog, off)
			}
			md.events = append(md.events, modelEvent{kind: worklease.EventEnqueued, offset: off, at: now, enqueued: !md.leased && !md.paused})
		}
		return worklease.AcquireResult{Status: worklease.Enqueued}, nil
	}
	if len(md.backlog) > 0 {
		switch head := md.backlog[0]; {
		case head == off:
		case !md.cfg.bestEffort:
			return worklease.AcquireResult{}, &worklease.BacklogOrderError{Domain: domain, Expected: head, Got: off}
		case md.scheduled[off].After(now):
			return worklease.AcquireResult{Status: worklease.Enqueued}, nil // out of turn, it waits for its time too
		default:
			md.emit(worklease.EventOutOfOrder, off, 0, worklease.Token{}, nil, now)
		}
		if i := slices.Index(md.backlog, off); i >= 0 {
			md.backlog = slices.Delete(slices.Clone(md.backlog), i, i+1)
			delete(md.scheduled, off)
		}
	}
	md.retryAt = time.Time{} // a grant ends the domain's delay
	md.leased = true
	md.lease = modelLease{offset: off, acquiredAt: now, attempts: 1}
	md.chainedFrom, md.chainedUnsure = worklease.Token{}, false
	if a, ok := md.carried[off]; ok {
		md.lease.retries, md.lease.acquiredAt, md.lease.attempts = a.retries, a.acquiredAt, a.attempts+1
		delete(md.carried, off)
	}
	if md.cfg.ttl > 0 {
		md.lease.expiresAt = now.Add(md.cfg.ttl)
	}
	md.granted = append(md.granted, off)
	return md.lease.result(worklease.Acquired), nil
}

func modelHas[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// grant records tok as the token of the lease acquire just granted.
func (l *leaseModel) grant(domain string, tok worklease.Token, now time.Time) {
	md := l.domains[domain]
	md.lease.token = tok
	md.grants = append(md.grants, tok)
	l.issued[tok] = domain
	l.grants++
	md.emit(worklease.EventAcquired, md.lease.offset, md.lease.attempts, tok, nil, now)
}

// checkToken is the token check of Succeed, Fail and Extend, on a domain
// with a record. A rejection is an event.
func (md *modelDomain) checkToken(tok worklease.Token, now time.Time) error {
	if md.leased && tok == md.lease.token {
		return nil
	}
	var err error
	switch {
	case !tok.IsZero() && tok == md.revoked:
		err = md.revokedErr
	case !md.leased:
		err = worklease.ErrNoLease
	default:
		err = worklease.ErrTokenMismatch
	}
	off := int64(-1)
	if md.leased {
		off = md.lease.offset
	}
	md.emit(worklease.EventRejected, off, 0, tok, err, now)
	return err
}

func (md *modelDomain) succeed(tok worklease.Token, now time.Time) (worklease.SucceedResult, error) {
	if !md.created {
		return worklease.SucceedResult{}, worklease.ErrNoLease
	}
	md.touch(now)
	if err := md.checkToken(tok, now); err != nil {
		return worklease.SucceedResult{}, err
	}
	md.emit(worklease.EventProcessed, md.lease.offset, md.lease.attempts, tok, nil, now)
	md.processed[md.lease.offset] = true
	delete(md.payloads, md.lease.offset)
	md.hw = max(md.hw, md.lease.offset)
	md.leased, md.lease = false, modelLease{}
	if next, ok := md.hint(); ok {
		return worklease.SucceedResult{Status: worklease.NextHint, Next: next}, nil
	}
	return worklease.SucceedResult{Status: worklease.NoBacklog}, nil
}

func (md *modelDomain) fail(tok worklease.Token, cause error, now time.Time) (worklease.FailResult, error) {
	if !md.created {
		return worklease.FailResult{}, worklease.ErrNoLease
	}
	md.touch(now)
	if err := md.checkToken(tok, now); err != nil {
		return worklease.FailResult{}, err
	}
	cause = modelKeptCause(cause)
	if md.lease.retries < md.cfg.maxRetries {
		md.lease.retries++
		md.lease.attempts++
		// The next attempt gets at least a full TTL.
		if at := now.Add(md.cfg.ttl); md.cfg.ttl > 0 && at.After(md.lease.expiresAt) {
			md.lease.expiresAt = at
		}
		md.emit(worklease.EventRetrying, md.lease.offset, md.lease.retries, tok, cause, now)
		return worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: md.lease.retries}, nil
	}
	retries := md.lease.retries
	md.deadLetter(md.lease.offset, md.lease.attempts, tok, cause, now, md.cfg.park)
	md.leased, md.lease = false, modelLease{}
	if md.paused {
		return worklease.FailResult{Status: worklease.GiveUpParked, RetryCount: retries}, nil
	}
	if next, ok := md.hint(); ok {
		return worklease.FailResult{Status: worklease.GiveUpNextHint, RetryCount: retries, Next: next}, nil
	}
	return worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: retries}, nil
}

// succeedNext is SucceedNext on the model: succeed, then, unless the domain
// is paused, the grant of the backlog's head, as acquire would grant it. On
// NextAcquired the model cannot know the new token: Lease.Token is zero,
// and the caller records the real one with grant.
func (md *modelDomain) succeedNext(domain string, tok worklease.Token, now time.Time) (worklease.SucceedResult, error) {
	res, err := md.succeed(tok, now)
	if err != nil || res.Status != worklease.NextHint || md.paused || md.headWaits(now) {
		return res, err
	}
	md.acquireHead(domain, res.Next, now)
	return worklease.SucceedResult{Status: worklease.NextAcquired, Lease: md.leaseInfo(domain)}, nil
}

// failNext is FailNext on the model: fail, then, if that gave up with a
// hint, the grant of the backlog's head. The token is left as succeedNext
// leaves it.
func (md *modelDomain) failNext(domain string, tok worklease.Token, cause error, now time.Time) (worklease.FailResult, error) {
	res, err := md.fail(tok, cause, now)
	if err != nil || res.Status != worklease.GiveUpNextHint || md.headWaits(now) {
		return res, err
	}
	md.acquireHead(domain, res.Next, now)
	return worklease.FailResult{Status: worklease.GiveUpNextAcquired, RetryCount: res.RetryCount, Lease: md.leaseInfo(domain)}, nil
}

// acquireHead grants head, the backlog's head on an idle, running domain.
func (md *modelDomain) acquireHead(domain string, head int64, now time.Time) {
	if res, err := md.acquire(domain, head, now); err != nil || res.Status != worklease.Acquired {
		panic(fmt.Sprintf("model: the head %d of an idle domain was not granted: %v, %v", head, res.Status, err))
	}
}

func (md *modelDomain) extend(tok worklease.Token, d time.Duration, now time.Time) (time.Time, error) {
	if d <= 0 {
		return time.Time{}, worklease.ErrInvalidDuration
	}
	if !md.created {
		return time.Time{}, worklease.ErrNoLease
	}
	md.touch(now)
	if err := md.checkToken(tok, now); err != nil {
		return time.Time{}, err
	}
	if md.cfg.ttl == 0 {
		return time.Time{}, nil
	}
	if at := now.Add(d); at.After(md.lease.expiresAt) {
		md.lease.expiresAt = at
		md.emit(worklease.EventExtended, md.lease.offset, md.lease.attempts, tok, nil, now)
	}
	return md.lease.expiresAt, nil
}

// info is what Inspect reports, without touching the domain.
func (md *modelDomain) info(domain string) worklease.DomainInfo {
	info := worklease.DomainInfo{
		Leased:    md.leased,
		Paused:    md.paused,
		Processed: md.processedCount(),
		Failed:    int64(len(md.failed)),
	}
	if md.leased {
		info.Lease = md.leaseInfo(domain)
	}
	if len(md.backlog) > 0 {
		info.Backlog = slices.Clone(md.backlog)
	}
	return info
}

func (md *modelDomain) leaseInfo(domain string) worklease.LeaseInfo {
	l := md.lease
	return worklease.LeaseInfo{Domain: domain, Offset: l.offset, Token: l.token, AcquiredAt: l.acquiredAt, ExpiresAt: l.expiresAt, RetryCount: l.retries}
}

// modelSameInfo reports whether two DomainInfos are equal, as equal would,
// without its cost, but for times in other locations: only when it reports
// a difference is equal asked.
func modelSameInfo(a, b worklease.DomainInfo) bool {
	return a.Leased == b.Leased && a.Lease == b.Lease && a.Paused == b.Paused &&
		slices.Equal(a.Backlog, b.Backlog) &&
		a.Processed == b.Processed && a.Failed == b.Failed
}

func (md *modelDomain) deadLetters(domain string) []worklease.DeadLetter {
	var out []worklease.DeadLetter
	for _, off := range slices.Sorted(maps.Keys(md.failed)) {
		dl := md.failed[off]
		out = append(out, worklease.DeadLetter{Domain: domain, Offset: off, Cause: dl.cause, Attempts: dl.attempts, At: dl.at})
	}
	return out
}

// The admin calls. Each returns the offset the domain grants next, as the
// backend's do.

func (md *modelDomain) kill(off int64, reason string, now time.Time) (int64, bool, error) {
	if off < 0 {
		return 0, false, worklease.ErrInvalidOffset
	}
	if md.cfg.monotonic && !md.created {
		return 0, false, worklease.ErrOffsetAhead // nothing of it is queued or in flight
	}
	md.created = true
	md.touch(now)
	if md.isProcessed(off) {
		return 0, false, worklease.ErrAlreadyProcessed
	}
	if modelHas(md.failed, off) {
		next, ok := md.next(now)
		return next, ok, nil
	}
	inFlight := md.leased && md.lease.offset == off
	if md.cfg.monotonic && !inFlight && !slices.Contains(md.backlog, off) {
		// Not processed, so above hw: failing it would make the offsets
		// below it count as processed.
		return 0, false, worklease.ErrOffsetAhead
	}
	var cause error // an empty reason is no cause
	if reason != "" {
		cause = modelKeptCause(errors.New(reason))
	}
	attempts, tok := 0, worklease.Token{}
	if inFlight {
		attempts, tok = md.lease.attempts, md.lease.token
		md.endLease(tok, worklease.ErrLeaseRevoked)
	} else if i := slices.Index(md.backlog, off); i >= 0 {
		attempts = md.carried[off].attempts
		md.unqueue(i) // the delay was the head's
	}
	md.emit(worklease.EventKilled, off, attempts, tok, cause, now)
	md.deadLetter(off, attempts, tok, cause, now, false) // a kill never parks
	next, ok := md.next(now)
	return next, ok, nil
}

func (md *modelDomain) redrive(off int64, now time.Time) (int64, bool, error) {
	if off < 0 {
		return 0, false, worklease.ErrInvalidOffset
	}
	if !md.created {
		return 0, false, worklease.ErrNotDeadLettered
	}
	md.touch(now)
	if !modelHas(md.failed, off) {
		return 0, false, worklease.ErrNotDeadLettered
	}
	delete(md.failed, off)
	md.backlog = slices.Insert(slices.Clone(md.backlog), 0, off) // fresh attempts: nothing carried
	md.retryAt = time.Time{}                                     // the delay was the old head's
	md.emit(worklease.EventRedriven, off, 0, worklease.Token{}, nil, now)
	next, ok := md.next(now)
	return next, ok, nil
}

func (md *modelDomain) forceRelease(now time.Time) (int64, bool, error) {
	if !md.created {
		return 0, false, worklease.ErrNoLease
	}
	md.touch(now)
	if !md.leased {
		return 0, false, worklease.ErrNoLease
	}
	l := md.lease
	md.emit(worklease.EventReleased, l.offset, l.attempts, l.token, nil, now)
	md.endLease(l.token, worklease.ErrLeaseRevoked)
	md.requeue(l.offset, modelAttempt{attempts: l.attempts, retries: l.retries, acquiredAt: l.acquiredAt}, now)
	next, ok := md.next(now)
	return next, ok, nil
}

func (md *modelDomain) pause(now time.Time) {
	md.created = true
	md.touch(now)
	if !md.paused {
		md.paused = true
		md.retryAt = time.Time{}
		md.emit(worklease.EventPaused, -1, 0, worklease.Token{}, nil, now)
	}
}

func (md *modelDomain) resume(now time.Time) (int64, bool) {
	if !md.created {
		return 0, false
	}
	md.touch(now)
	if md.paused {
		md.paused = false
		md.retryAt = time.Time{}
		md.emit(worklease.EventResumed, -1, 0, worklease.Token{}, nil, now)
	}
	return md.next(now)
}

// forget reports the error of Forget, and whether it dropped the domain.
func (md *modelDomain) forget(now time.Time) (bool, error) {
	if !md.created {
		return false, nil
	}
	md.touch(now)
	if md.leased || md.paused || len(md.backlog) > 0 {
		return false, worklease.ErrDomainBusy
	}
	md.emit(worklease.EventForgotten, -1, 0, worklease.Token{}, nil, now)
	md.reset()
	return true, nil
}

// reap is Reap on the model.
func (l *leaseModel) reap(now time.Time) []worklease.Expiry {
	if l.cfg.ttl == 0 {
		return nil
	}
	var out []worklease.Expiry
	for _, d := range modelAllDomains {
		md := l.domains[d]
		lease := md.lease
		if !md.touch(now) {
			continue
		}
		next, ok := md.next(now)
		out = append(out, worklease.Expiry{
			Domain: d, Offset: lease.offset, Token: lease.token, Attempts: lease.attempts,
			DeadLettered: modelHas(md.failed, lease.offset), Head: worklease.Head{Next: next, HasNext: ok},
		})
	}
	return out
}

// modelTest holds one case's backend, model and clock.
type modelTest struct {
	suite *Suite
	outer *testing.T // for New and Reopen
	ctx   context.Context
	b     worklease.Backend
	opts  []worklease.Option // b's, for Reopen
	other worklease.Backend  // a second backend, whose tokens b must reject; nil until needed
	clk   *Clock
	model *leaseModel
	obs   *recorder // nil unless the case observes events

	otherOffset int64 // next offset to acquire in other
}

// Each call below runs on the model first: the model needs nothing from the
// backend to predict a result (except a new token, recorded afterwards), and
// knowing whether the call must fail tells whether to take the snapshot
// that requireUnchanged compares with. due is taken before, since the
// model's call revokes an expired lease.

func (s *modelTest) tryAcquire(t *rapid.T, d string, off int64) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	want, wantErr := md.acquire(d, off, now)
	before := s.before(t, d, due, true, wantErr)
	got, err := s.b.TryAcquire(s.ctx, d, off)

	if wantErr != nil {
		var wantOrder, gotOrder *worklease.BacklogOrderError
		check(t, errors.As(wantErr, &wantOrder), "model: %v is no *BacklogOrderError", wantErr)
		mustSentinel(t, worklease.ErrBacklogOrder, err, "TryAcquire(%q, %d)", d, off)
		check(t, errors.As(err, &gotOrder), "TryAcquire(%q, %d): %v is no *BacklogOrderError", d, off, err)
		mustEqual(t, *wantOrder, *gotOrder, "TryAcquire(%q, %d)", d, off)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "TryAcquire(%q, %d)", d, off)
	mustEqual(t, want.Status, got.Status, "TryAcquire(%q, %d)", d, off)
	mustTrue(t, want.AcquiredAt.Equal(got.AcquiredAt), "TryAcquire(%q, %d): AcquiredAt %v, want %v", d, off, got.AcquiredAt, want.AcquiredAt)
	mustTrue(t, want.ExpiresAt.Equal(got.ExpiresAt), "TryAcquire(%q, %d): ExpiresAt %v, want %v", d, off, got.ExpiresAt, want.ExpiresAt)
	mustEqual(t, want.RetryCount, got.RetryCount, "TryAcquire(%q, %d): RetryCount", d, off)
	if want.Status != worklease.Acquired {
		mustEqual(t, want.Token, got.Token, "TryAcquire(%q, %d): Token", d, off)
		return
	}
	s.requireGrant(t, d, got.Token, now)
}

// requireGrant checks the token of a grant the model just made in d, and
// records it: the token must be new everywhere and fence this domain's
// grants in order: each above the one before, across Forgets and restarts.
func (s *modelTest) requireGrant(t *rapid.T, d string, tok worklease.Token, now time.Time) {
	md := s.model.domains[d]
	mustFalse(t, tok.IsZero(), "granted with the zero token")
	if prev, dup := s.model.issued[tok]; dup {
		t.Fatalf("token %v granted in %q was already granted in %q", tok, d, prev)
	}
	if n := len(md.grants); n > 0 {
		check(t, tok.Fence() > md.grants[n-1].Fence(), "%q: fence %d of grant %d is not above the fence %d before it", d, tok.Fence(), n+1, md.grants[n-1].Fence())
	}
	s.model.grant(d, tok, now)
}

func (s *modelTest) succeed(t *rapid.T, d string, tok worklease.Token) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	want, wantErr := md.succeed(tok, now)
	before := s.before(t, d, due, true, wantErr)
	got, err := s.b.Succeed(s.ctx, d, tok)
	if wantErr != nil {
		mustSentinel(t, wantErr, err)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "Succeed(%q, %v)", d, tok)
	mustEqual(t, want, got, "Succeed(%q, %v)", d, tok)
}

func (s *modelTest) fail(t *rapid.T, d string, tok worklease.Token, cause error) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	want, wantErr := md.fail(tok, cause, now)
	before := s.before(t, d, due, true, wantErr)
	got, err := s.b.Fail(s.ctx, d, tok, cause)
	if wantErr != nil {
		mustSentinel(t, wantErr, err)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "Fail(%q, %v)", d, tok)
	mustEqual(t, want, got, "Fail(%q, %v)", d, tok)
}

func (s *modelTest) succeedNext(t *rapid.T, d string, tok worklease.Token) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	want, wantErr := md.succeedNext(d, tok, now)
	before := s.before(t, d, due, true, wantErr)
	got, err := s.b.SucceedNext(s.ctx, d, tok)
	if wantErr != nil {
		mustSentinel(t, wantErr, err)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "SucceedNext(%q, %v)", d, tok)
	if want.Status == worklease.NextAcquired {
		want.Lease.Token = got.Lease.Token // checked by requireGrant
	}
	mustEqual(t, want, got, "SucceedNext(%q, %v)", d, tok)
	if got.Status == worklease.NextAcquired {
		s.requireGrant(t, d, got.Lease.Token, now)
	}
	s.requireNoHandOffGap(t, d, "SucceedNext")
}

func (s *modelTest) failNext(t *rapid.T, d string, tok worklease.Token, cause error) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	want, wantErr := md.failNext(d, tok, cause, now)
	before := s.before(t, d, due, true, wantErr)
	got, err := s.b.FailNext(s.ctx, d, tok, cause)
	if wantErr != nil {
		mustSentinel(t, wantErr, err)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "FailNext(%q, %v)", d, tok)
	if want.Status == worklease.GiveUpNextAcquired {
		want.Lease.Token = got.Lease.Token // checked by requireGrant
	}
	mustEqual(t, want, got, "FailNext(%q, %v)", d, tok)
	if got.Status == worklease.GiveUpNextAcquired {
		s.requireGrant(t, d, got.Lease.Token, now)
	}
	s.requireNoHandOffGap(t, d, "FailNext")
}

// requireNoHandOffGap checks what SucceedNext and FailNext promise when they
// succeed: the domain is not left idle with a backlog unless it is paused
// or its head is scheduled for later, so that TryAcquire of any offset
// queues it rather than refusing it.
func (s *modelTest) requireNoHandOffGap(t *rapid.T, d, call string) {
	md := s.model.domains[d]
	check(t, md.leased || md.paused || len(md.backlog) == 0 || md.headWaits(s.clk.Now()),
		"%q: %s left the domain idle with the backlog %v", d, call, md.backlog)
}

func (s *modelTest) extend(t *rapid.T, d string, tok worklease.Token, by time.Duration) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	want, wantErr := md.extend(tok, by, now)
	before := s.before(t, d, due, by > 0, wantErr) // a non-positive duration is refused before the domain is touched
	got, err := s.b.Extend(s.ctx, d, tok, by)
	if wantErr != nil {
		mustSentinel(t, wantErr, err)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "Extend(%q, %v, %v)", d, tok, by)
	mustTrue(t, want.Equal(got) && want.IsZero() == got.IsZero(), "Extend(%q, %v, %v) = %v, want %v", d, tok, by, got, want)
}

// extendMany is ExtendMany on the model: each claim is answered as Extend
// would answer it, in order; a duration that is not positive refuses the
// whole call.
func (s *modelTest) extendMany(t *rapid.T, claims []worklease.Claim, by time.Duration) {
	now := s.clk.Now()
	got, errs, err := s.b.ExtendMany(s.ctx, claims, by)
	if by <= 0 {
		mustSentinel(t, worklease.ErrInvalidDuration, err, "ExtendMany(%v)", by)
		check(t, got == nil && errs == nil, "ExtendMany(%v): answers beside its error", by)
		return
	}
	mustNoError(t, err, "ExtendMany")
	mustEqual(t, len(claims), len(got), "ExtendMany: expiries")
	mustEqual(t, len(claims), len(errs), "ExtendMany: errors")
	for i, c := range claims {
		want, wantErr := s.model.domains[c.Domain].extend(c.Token, by, now)
		if wantErr != nil {
			mustSentinel(t, wantErr, errs[i], "ExtendMany: claim %d of %q", i, c.Domain)
			mustZero(t, got[i])
			continue
		}
		mustNoError(t, errs[i], "ExtendMany: claim %d of %q", i, c.Domain)
		mustTrue(t, want.Equal(got[i]) && want.IsZero() == got[i].IsZero(), "ExtendMany: claim %d of %q: %v, want %v", i, c.Domain, got[i], want)
	}
}

func (s *modelTest) inspect(t *rapid.T, d string) {
	md, now := s.model.domains[d], s.clk.Now()
	md.touch(now)
	got, err := s.b.Inspect(s.ctx, d)
	mustNoError(t, err)
	if want := md.info(d); !modelSameInfo(want, got) {
		mustEqual(t, want, got, "Inspect(%q)", d)
	}
}

func (s *modelTest) reap(t *rapid.T) {
	want := s.model.reap(s.clk.Now())
	got, err := s.b.Reap(s.ctx)
	mustNoError(t, err)
	if len(want) == 0 {
		check(t, len(got) == 0, "Reap: got %+v, want none", got)
		return
	}
	mustEqual(t, want, got, "Reap")
}

// requireAdmin checks an admin call's results against the model's.
func (s *modelTest) requireAdmin(t *rapid.T, call, d string, before *modelSnapshot, wantNext int64, wantOK bool, wantErr error, next int64, ok bool, err error) {
	if wantErr != nil {
		mustSentinel(t, wantErr, err)
		mustZero(t, next, "%s(%q): next", call, d)
		mustFalse(t, ok, "%s(%q): ok", call, d)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "%s(%q)", call, d)
	mustEqual(t, [2]any{wantNext, wantOK}, [2]any{next, ok}, "%s(%q): next, ok", call, d)
}

func (s *modelTest) kill(t *rapid.T, d string, off int64, reason string) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	wantNext, wantOK, wantErr := md.kill(off, reason, now)
	// A negative offset is refused before the domain is touched, and so is
	// any offset of a domain without a record under WithMonotonicOffsets.
	before := s.before(t, d, due, off >= 0, wantErr)
	h, err := s.b.Kill(s.ctx, d, off, reason)
	s.requireAdmin(t, fmt.Sprintf("Kill(%d)", off), d, before, wantNext, wantOK, wantErr, h.Next, h.HasNext, err)
}

func (s *modelTest) redrive(t *rapid.T, d string, off int64) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	wantNext, wantOK, wantErr := md.redrive(off, now)
	before := s.before(t, d, due, off >= 0, wantErr) // a negative offset is refused before the domain is touched
	h, err := s.b.Redrive(s.ctx, d, off)
	s.requireAdmin(t, fmt.Sprintf("Redrive(%d)", off), d, before, wantNext, wantOK, wantErr, h.Next, h.HasNext, err)
}

func (s *modelTest) forceRelease(t *rapid.T, d string) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	wantNext, wantOK, wantErr := md.forceRelease(now)
	before := s.before(t, d, due, true, wantErr)
	h, err := s.b.ForceRelease(s.ctx, d)
	s.requireAdmin(t, "ForceRelease", d, before, wantNext, wantOK, wantErr, h.Next, h.HasNext, err)
}

func (s *modelTest) pause(t *rapid.T, d string) {
	s.model.domains[d].pause(s.clk.Now())
	mustNoError(t, s.b.Pause(s.ctx, d), "Pause(%q)", d)
}

func (s *modelTest) resume(t *rapid.T, d string) {
	wantNext, wantOK := s.model.domains[d].resume(s.clk.Now())
	h, err := s.b.Resume(s.ctx, d)
	s.requireAdmin(t, "Resume", d, nil, wantNext, wantOK, nil, h.Next, h.HasNext, err)
}

func (s *modelTest) forget(t *rapid.T, d string) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	_, wantErr := md.forget(now)
	before := s.before(t, d, due, true, wantErr)
	err := s.b.Forget(s.ctx, d)
	if wantErr != nil {
		mustSentinel(t, wantErr, err)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "Forget(%q)", d)
}

// modelSameCause reports whether a dead letter's or event's cause is the one
// the model expects: both none, or both with the same text (a Fail cause or
// Kill reason as cut to MaxCauseLen, a sentinel). A cut Fail cause still
// unwraps to the caller's error; the Errors area checks that.
func modelSameCause(want, got error) bool {
	if want == nil || got == nil {
		return want == nil && got == nil
	}
	return got.Error() == want.Error()
}

// drawToken picks the token for a Succeed, Fail or Extend on d: the current
// lease's, the latest revoked one, a stale one from d, one from another
// domain, one from another backend, the zero Token, or one made up with
// NewToken.
func (s *modelTest) drawToken(t *rapid.T, d string) worklease.Token {
	md := s.model.domains[d]
	var stale, foreign []worklease.Token
	for _, tok := range md.grants {
		if !md.leased || tok != md.lease.token {
			stale = append(stale, tok)
		}
	}
	for _, od := range modelAllDomains {
		if od != d {
			foreign = append(foreign, s.model.domains[od].grants...)
		}
	}
	kinds := []string{"zero", "fabricated", "otherBackend"}
	if md.leased {
		kinds = append(kinds, "current", "current")
	}
	if !md.revoked.IsZero() {
		kinds = append(kinds, "revoked")
	}
	if len(stale) > 0 {
		kinds = append(kinds, "stale")
	}
	if len(foreign) > 0 {
		kinds = append(kinds, "foreign")
	}
	switch kind := rapid.SampledFrom(kinds).Draw(t, "tokenKind"); kind {
	case "zero":
		return worklease.Token{}
	case "current":
		return md.lease.token
	case "revoked":
		return md.revoked
	case "stale":
		return rapid.SampledFrom(stale).Draw(t, "staleToken")
	case "foreign":
		return rapid.SampledFrom(foreign).Draw(t, "foreignToken")
	case "otherBackend":
		// A token that is, or once was, valid in another backend; it may
		// share its fence and domain serial with a token of b.
		if s.other == nil {
			s.other = s.suite.New(s.outer, worklease.WithClock(s.clk), worklease.WithMaxRetries(s.model.cfg.maxRetries))
			check(t, s.other != nil, "leasetest: Suite.New returned nil")
		}
		off := s.otherOffset
		s.otherOffset++
		res, err := s.other.TryAcquire(s.ctx, d, off)
		mustNoError(t, err, "other backend: TryAcquire(%q, %d)", d, off)
		mustEqual(t, worklease.Acquired, res.Status, "other backend: TryAcquire(%q, %d)", d, off)
		_, err = s.other.Succeed(s.ctx, d, res.Token)
		mustNoError(t, err, "other backend: Succeed(%q)", d)
		return res.Token
	case "fabricated":
		// Parts near the real ones, so that a forgery may differ from the
		// current token in a single part, or even equal it: a Token is a
		// plain value, and one equal to the lease's token is that token.
		instances := []uint64{1, math.MaxUint64}
		if toks := s.model.issuedInOrder(); len(toks) > 0 {
			inst := toks[0].Instance()
			instances = append(instances, inst, inst^1)
		}
		fence := rapid.Uint64Range(1, 8).Draw(t, "fence")
		serial := rapid.Uint64Range(1, 5).Draw(t, "serial")
		if toks := s.model.domains[d].grants; len(toks) > 0 {
			serial = rapid.SampledFrom([]uint64{serial, toks[0].Serial()}).Draw(t, "serialOf")
		}
		instance := rapid.SampledFrom(instances).Draw(t, "instance")
		if instance == 0 {
			instance = 1
		}
		return token(t, fence, serial, instance)
	default:
		panic("unknown token kind " + kind)
	}
}

// drawKnownOffset picks an offset for Kill or Redrive on d: one in any of
// its states, in flight, queued, failed, processed or never seen.
func (s *modelTest) drawKnownOffset(t *rapid.T, d string) int64 {
	md := s.model.domains[d]
	offs := []int64{rapid.Int64Range(0, maxModelOffset).Draw(t, "anyOffset")}
	if md.leased {
		offs = append(offs, md.lease.offset)
	}
	offs = append(offs, md.backlog...)
	offs = append(offs, slices.Sorted(maps.Keys(md.failed))...)
	offs = append(offs, slices.Sorted(maps.Keys(md.processed))...)
	if md.cfg.monotonic && md.hw >= 0 {
		offs = append(offs, md.hw)
		if md.hw < math.MaxInt64 {
			offs = append(offs, md.hw+1)
		}
	}
	return rapid.SampledFrom(offs).Draw(t, "knownOffset")
}

// issuedInOrder returns every token granted, domain by domain in grant order.
func (l *leaseModel) issuedInOrder() []worklease.Token {
	var toks []worklease.Token
	for _, d := range modelAllDomains {
		toks = append(toks, l.domains[d].grants...)
	}
	return toks
}

// A modelSnapshot is everything observable about one domain without
// touching it, plus Inspect when the domain has no lease due. (Leases,
// DeadLetters and Domains are documented to revoke nothing.)
type modelSnapshot struct {
	Inspected   bool
	Info        worklease.DomainInfo
	Lease       []worklease.LeaseInfo // d's entry in Leases
	DeadLetters []worklease.DeadLetter
	Known       bool // d is in Domains
}

// before takes the snapshot that requireUnchanged compares with after a
// call on d that must fail with wantErr; if wantErr is nil there is nothing
// to compare. A call that touches the domain revokes its lease if it was due
// (as the model told before the call), even when it fails; then there is
// nothing to compare with either, and the "" check compares the backend
// with the model instead. The snapshot must not itself revoke the lease, or
// the call would never be the one that does.
func (s *modelTest) before(t *rapid.T, d string, due, touches bool, wantErr error) *modelSnapshot {
	if wantErr == nil || touches && due {
		return nil
	}
	snap := s.snapshot(t, d, !due)
	return &snap
}

func (s *modelTest) snapshot(t *rapid.T, d string, inspect bool) modelSnapshot {
	var snap modelSnapshot
	var err error
	if inspect {
		snap.Inspected = true
		snap.Info, err = s.b.Inspect(s.ctx, d)
		mustNoError(t, err, "Inspect(%q)", d)
	}
	snap.DeadLetters, err = s.b.DeadLetters(s.ctx, d)
	mustNoError(t, err, "DeadLetters(%q)", d)
	leases, err := s.b.Leases(s.ctx)
	mustNoError(t, err, "Leases")
	for _, l := range leases {
		if l.Domain == d {
			snap.Lease = append(snap.Lease, l)
		}
	}
	domains, err := s.b.Domains(s.ctx)
	mustNoError(t, err, "Domains")
	snap.Known = slices.Contains(domains, d)
	return snap
}

// requireUnchanged checks that a call that returned an error changed nothing
// in d, not even whether the backend knows d.
func (s *modelTest) requireUnchanged(t *rapid.T, d string, before *modelSnapshot) {
	if before == nil {
		return
	}
	after := s.snapshot(t, d, before.Inspected)
	mustEqual(t, *before, after, "failed call changed %q", d)
}

// check is the "" action: it runs after every step.
func (s *modelTest) check(t *rapid.T) {
	s.model.syncReady(s.clk.Now())
	for _, d := range modelAllDomains {
		s.checkDomain(t, d)
	}
	s.checkDomains(t)
	s.checkLeases(t)
	s.checkDeadLetters(t)
	s.checkEvents(t)
	// 5. Token fencing, across domains: every grant got a token never
	// issued before, in any domain.
	check(t, len(s.model.issued) == s.model.grants, "a token was issued twice: %d grants, %d tokens", s.model.grants, len(s.model.issued))
	if s.suite.Check != nil {
		mustNoError(t, s.suite.Check(s.b), "Check")
	}
}

// checkDomain compares d in the backend with d in the model, without
// touching d, and checks the invariants on the model's side.
func (s *modelTest) checkDomain(t *rapid.T, d string) {
	md := s.model.domains[d]

	// Inspect revokes an expired lease, so a domain whose lease is due is
	// left for a call to find; it cannot have changed since the last
	// check, which compared it, since every call that changes it would
	// have revoked the lease first.
	if !md.due(s.clk.Now()) {
		info, err := s.b.Inspect(s.ctx, d)
		mustNoError(t, err, "Inspect(%q)", d)
		if want := md.info(d); !modelSameInfo(want, info) {
			mustEqual(t, want, info, "%q: Inspect", d)
		}
	}
	dls, err := s.b.DeadLetters(s.ctx, d)
	mustNoError(t, err, "DeadLetters(%q)", d)
	modelRequireDeadLetters(t, md.deadLetters(d), dls, fmt.Sprintf("DeadLetters(%q)", d))

	s.model.checkInvariants(t, d)
	s.model.checkPull(t, d)
	s.model.checkHistory(t, d)
}

// checkDomains compares Domains with the domains the model knows: a domain
// exists from the call that creates it until Forget drops it.
func (s *modelTest) checkDomains(t *rapid.T) {
	got, err := s.b.Domains(s.ctx)
	mustNoError(t, err, "Domains")
	var want []string
	for _, d := range modelAllDomains {
		if s.model.domains[d].created {
			want = append(want, d)
		}
	}
	if !slices.Equal(want, got) {
		t.Fatalf("Domains: got %q, want %q", got, want)
	}
}

func (s *modelTest) checkLeases(t *rapid.T) {
	got, err := s.b.Leases(s.ctx)
	mustNoError(t, err)
	var want []worklease.LeaseInfo
	for _, d := range modelAllDomains {
		// Leases revokes nothing: a lease that is due is still listed.
		if md := s.model.domains[d]; md.leased {
			want = append(want, md.leaseInfo(d))
		}
	}
	if !slices.Equal(want, got) {
		mustEqual(t, want, got, "Leases")
	}
}

func (s *modelTest) checkDeadLetters(t *rapid.T) {
	got, err := s.b.DeadLetters(s.ctx, "")
	mustNoError(t, err)
	var want []worklease.DeadLetter
	for _, d := range modelAllDomains {
		want = append(want, s.model.domains[d].deadLetters(d)...)
	}
	modelRequireDeadLetters(t, want, got, `DeadLetters("")`)
}

func modelRequireDeadLetters(t *rapid.T, want, got []worklease.DeadLetter, what string) {
	if slices.EqualFunc(want, got, func(w, g worklease.DeadLetter) bool {
		return w.Domain == g.Domain && w.Offset == g.Offset && w.Attempts == g.Attempts && w.At.Equal(g.At) && modelSameCause(w.Cause, g.Cause)
	}) {
		return
	}
	check(t, len(got) == len(want), "%s: got %v, want %v", what, got, want)
	for i, w := range want {
		g := got[i]
		mustEqual(t, w.Domain, g.Domain, "%s[%d]: Domain", what, i)
		mustEqual(t, w.Offset, g.Offset, "%s[%d]: Offset", what, i)
		mustEqual(t, w.Attempts, g.Attempts, "%s[%d] (offset %d): Attempts", what, i, w.Offset)
		mustTrue(t, w.At.Equal(g.At), "%s[%d] (offset %d): At %v, want %v", what, i, w.Offset, g.At, w.At)
		mustTrue(t, modelSameCause(w.Cause, g.Cause), "%s[%d] (offset %d): Cause %v, want %v", what, i, w.Offset, g.Cause, w.Cause)
	}
}

// checkEvents compares the events the observer saw, domain by domain, with
// the model's.
func (s *modelTest) checkEvents(t *rapid.T) {
	if s.obs == nil {
		return
	}
	for _, d := range s.obs.domains() {
		check(t, slices.Contains(modelAllDomains, d), "event for the domain %.8q, never used", d)
	}
	for _, d := range modelAllDomains {
		md := s.model.domains[d]
		got := s.obs.of(d)
		if len(got) != len(md.events) {
			t.Fatalf("%q: observed %s\nwant %s", d, modelFormatEvents(got), modelFormatModelEvents(md.events))
		}
		for i := md.observed; i < len(got); i++ {
			w, g := md.events[i], got[i]
			if w.kind != g.Kind || d != g.Domain || w.offset != g.Offset || w.attempt != g.Attempt || w.token != g.Token ||
				!modelSameCause(w.cause, g.Cause) || !w.at.Equal(g.At) {
				t.Fatalf("%q: event %d: got %+v, want %+v\nobserved %s\nwant     %s", d, i, g, w,
					modelFormatEvents(got), modelFormatModelEvents(md.events))
			}
		}
		md.observed = len(got)
	}
}

func modelFormatEvents(evs []worklease.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, " %v(%d,%d)", e.Kind, e.Offset, e.Attempt)
	}
	return b.String()
}

func modelFormatModelEvents(evs []modelEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, " %v(%d,%d)", e.kind, e.offset, e.attempt)
	}
	return b.String()
}

// checkInvariants checks the contract's invariants on d in the model. The
// model is simple enough to be right by inspection; these checks make sure
// that it is, so that agreeing with it means obeying the contract.
func (l *leaseModel) checkInvariants(t *rapid.T, d string) {
	md := l.domains[d]
	inBacklog := make(map[int64]bool, len(md.backlog))
	for _, off := range md.backlog {
		check(t, !inBacklog[off], "%q: %d queued twice", d, off)
		inBacklog[off] = true
	}
	terminal := func(off int64) bool { return md.isProcessed(off) || modelHas(md.failed, off) }

	// 1. Single in-flight unit: at most one lease, on the latest grant,
	// and every offset granted since the record was made is in flight,
	// terminal, or back in the backlog (after an expiry, ForceRelease or
	// Redrive).
	if md.leased {
		check(t, len(md.grants) > 0 && len(md.granted) > 0, "%q: lease without a grant", d)
		check(t, md.grants[len(md.grants)-1] == md.lease.token, "%q: lease is not the latest grant", d)
		check(t, md.granted[len(md.granted)-1] == md.lease.offset, "%q: lease is not the latest grant", d)
		check(t, md.lease.retries >= 0, "%q: negative retry count", d)
		check(t, md.lease.retries <= l.cfg.maxRetries, "%q: more retries than allowed", d)
		check(t, (l.cfg.ttl > 0) == !md.lease.expiresAt.IsZero(), "%q: lease expiry %v with TTL %v", d, md.lease.expiresAt, l.cfg.ttl)
	} else {
		check(t, md.lease == modelLease{}, "%q: idle domain keeps a lease", d)
	}
	for _, off := range md.granted {
		check(t, terminal(off) || inBacklog[off] || md.leased && md.lease.offset == off,
			"%q: granted offset %d neither in flight, terminal nor queued", d, off)
	}

	// 2. Disjointness.
	for _, off := range md.backlog {
		check(t, !terminal(off), "%q: terminal offset %d queued", d, off)
	}
	if md.leased {
		off := md.lease.offset
		check(t, !terminal(off) && !inBacklog[off], "%q: current offset %d is terminal or queued", d, off)
	}
	for off := range md.processed {
		check(t, !modelHas(md.failed, off), "%q: %d both processed and failed", d, off)
		// What succeeded counts as processed, with WithMonotonicOffsets
		// too: nothing takes it back.
		check(t, md.isProcessed(off), "%q: %d succeeded but does not count as processed", d, off)
		check(t, off <= md.hw, "%q: %d succeeded above the highest terminal offset %d", d, off, md.hw)
	}
	for off := range md.failed {
		check(t, off <= md.hw, "%q: %d failed above the highest terminal offset %d", d, off, md.hw)
	}
	for off, a := range md.carried {
		check(t, inBacklog[off], "%q: attempts carried for %d, which is not queued", d, off)
		check(t, a.retries <= l.cfg.maxRetries, "%q: %d carries more retries than allowed", d, off)
	}

	// 4. Idempotence, in part (the rest is in checkHistory): every
	// processed offset was granted, and so was every failed one that
	// was not killed before it ran.
	granted := make(map[int64]bool, len(md.granted))
	for _, off := range md.granted {
		granted[off] = true
	}
	for off := range md.processed {
		check(t, granted[off] || md.cancelled[off], "%q: processed %d was never granted nor cancelled", d, off)
	}
	for off, dl := range md.failed {
		// An offset killed before any grant made no attempt.
		check(t, granted[off] || dl.attempts == 0, "%q: failed %d was never granted", d, off)
	}

	// 5. Token fencing: fences of grants strictly increase, across Forgets.
	for i, tok := range md.grants {
		check(t, !tok.IsZero(), "%q: zero token granted", d)
		check(t, i == 0 || tok.Fence() > md.grants[i-1].Fence(), "%q: fence did not increase", d)
		check(t, l.issued[tok] == d, "%q: token %v attributed to %q", d, tok, l.issued[tok])
	}
}

// A modelReplay is a domain's state rebuilt from nothing but its events
// since it was made. Replaying checks the history: that offsets
// entered and left the backlog only as the contract allows (3, FIFO
// discipline), that no terminal offset came back (4, idempotence), and that
// every lease ended before the next began (1). The state it ends in must be
// the model's, so the model's events tell the whole story; when the run
// observes, the backend's events are the model's, so they do too.
type modelReplay struct {
	leased    bool
	offset    int64
	token     worklease.Token
	retries   int
	attempts  int // made by the offset in flight, this one included
	paused    bool
	processed map[int64]bool
	failed    map[int64]bool
	hw        int64 // the highest offset processed or failed; -1: none
	backlog   []int64
	carried   map[int64]int // failed attempts a queued offset carries to its next grant
	made      map[int64]int // attempts a queued offset made, which a kill counts
	grants    int           // leases granted
	ended     int           // leases that ended
	grantsOf  map[int64]int // grants of each offset
	returns   map[int64]int // times each offset went back to the backlog after a grant or a failure
	// outOfOrderQueued: the offset of the latest EventOutOfOrder was queued
	// until that event took it out for the grant that follows.
	outOfOrderQueued bool

	// coreFIFO: offsets have only been appended to the backlog and taken
	// from its head, so the core contract's FIFO check applies: those that left
	// are a prefix of those that entered, and the backlog is the rest.
	coreFIFO bool
	enqueued []int64 // every offset appended, in order
	dequeued []int64 // every offset taken from the head, in order
}

func newModelReplay() modelReplay {
	return modelReplay{
		processed: map[int64]bool{}, failed: map[int64]bool{}, hw: -1, carried: map[int64]int{}, made: map[int64]int{},
		grantsOf: map[int64]int{}, returns: map[int64]int{}, coreFIFO: true,
	}
}

func (r *modelReplay) queued(off int64) bool { return slices.Contains(r.backlog, off) }

func (r *modelReplay) pushFront(off int64) {
	r.backlog = slices.Insert(r.backlog, 0, off)
	r.coreFIFO = false
}

func (r *modelReplay) remove(off int64) {
	if i := slices.Index(r.backlog, off); i >= 0 {
		r.backlog = slices.Delete(r.backlog, i, i+1)
		r.coreFIFO = false
	}
}

// checkHistory replays d's new events and compares the result with the
// model.
func (l *leaseModel) checkHistory(t *rapid.T, d string) {
	md := l.domains[d]
	if md.replayed == 0 {
		md.replay = newModelReplay()
	}
	for ; md.replayed < len(md.events); md.replayed++ {
		i := md.replayed
		var prev, next modelEvent
		if i > 0 {
			prev = md.events[i-1]
		}
		if i+1 < len(md.events) {
			next = md.events[i+1]
		}
		l.replayEvent(t, d, md.events[i], prev, next)
	}

	r := &md.replay
	check(t, md.leased == r.leased, "%q: replayed leased %v, model %v", d, r.leased, md.leased)
	if md.leased {
		check(t, md.lease.offset == r.offset && md.lease.token == r.token && md.lease.retries == r.retries,
			"%q: replayed lease %d %v %d, model %+v", d, r.offset, r.token, r.retries, md.lease)
	}
	check(t, md.paused == r.paused, "%q: replayed paused %v, model %v", d, r.paused, md.paused)
	check(t, md.hw == r.hw, "%q: replayed highest terminal offset %d, model %d", d, r.hw, md.hw)
	modelRequireOffsets(t, slices.Sorted(maps.Keys(md.processed)), slices.Sorted(maps.Keys(r.processed)), "%q: replayed processed", d)
	modelRequireOffsets(t, slices.Sorted(maps.Keys(md.failed)), slices.Sorted(maps.Keys(r.failed)), "%q: replayed failed", d)
	modelRequireOffsets(t, md.backlog, r.backlog, "%q: replayed backlog", d)
	check(t, len(r.carried) == len(md.carried), "%q: replayed carried attempts %v, model %v", d, r.carried, md.carried)
	for off, a := range md.carried {
		check(t, a.retries == r.carried[off], "%q: replayed attempts carried by %d: %d, model %d", d, off, r.carried[off], a.retries)
		check(t, a.attempts == r.made[off], "%q: replayed attempts made by %d: %d, model %d", d, off, r.made[off], a.attempts)
	}
	// Every lease ended but the one in flight; and each grant is one the
	// model recorded.
	check(t, r.grants == r.ended+modelBtoi(r.leased), "%q: grants do not add up: %d granted, %d ended, leased %v", d, r.grants, r.ended, r.leased)
	check(t, len(md.granted) == r.grants, "%q: replayed %d grants, model %d", d, r.grants, len(md.granted))

	// 3. FIFO, as the core contract states it, while only the core contract's moves were made.
	if r.coreFIFO {
		check(t, len(r.enqueued) == len(r.dequeued)+len(r.backlog), "%q: backlog lost or gained offsets", d)
		modelRequireOffsets(t, r.enqueued[:len(r.dequeued)], r.dequeued, "%q: dequeue order", d)
		modelRequireOffsets(t, r.enqueued[len(r.dequeued):], r.backlog, "%q: backlog order", d)
	}
}

// modelWhere names an event in a failure message; it is formatted only if
// a check fails.
type modelWhere struct {
	domain string
	ev     modelEvent
}

func (w modelWhere) String() string {
	return fmt.Sprintf("%q: %v(%d, attempt %d)", w.domain, w.ev.kind, w.ev.offset, w.ev.attempt)
}

// replayEvent applies one event, checking that the contract allows it;
// prev and next are its neighbours (zero at either end).
func (l *leaseModel) replayEvent(t *rapid.T, d string, ev, prev, next modelEvent) {
	md := l.domains[d]
	r := &md.replay
	x := ev.offset
	where := modelWhere{d, ev}
	current := func() {
		check(t, r.leased && r.offset == x && r.token == ev.token, "%s: not the lease in flight", where)
	}
	terminal := r.processed[x] || r.failed[x]
	if l.cfg.monotonic {
		// Every offset at or below hw counts as processed unless it is
		// failed, queued or in flight. held covers an offset the event
		// before took out of the backlog or the lease only to hand it to
		// this one: an out-of-order grant, or the requeue or dead letter
		// after an expiry, a release or a kill.
		held := r.queued(x) || r.leased && r.offset == x
		switch {
		case ev.kind == worklease.EventAcquired && prev.kind == worklease.EventOutOfOrder && prev.offset == x:
			held = held || r.outOfOrderQueued
		case (ev.kind == worklease.EventRequeued || ev.kind == worklease.EventDeadLettered) && prev.offset == x &&
			(prev.kind == worklease.EventExpired || prev.kind == worklease.EventReleased || prev.kind == worklease.EventKilled):
			held = true
		}
		terminal = r.failed[x] || x <= r.hw && !held
	}

	switch ev.kind {
	case worklease.EventAcquired:
		check(t, !(r.leased), "%s: a lease is already in flight", where)
		check(t, !(terminal), "%s: offset is terminal", where)
		check(t, !(ev.token.IsZero()), "%s: zero token", where)
		switch {
		case len(r.backlog) > 0 && r.backlog[0] == x:
			r.backlog = r.backlog[1:]
			r.dequeued = append(r.dequeued, x)
		case len(r.backlog) > 0:
			check(t, l.cfg.bestEffort && prev.kind == worklease.EventOutOfOrder && prev.offset == x,
				"%s: granted while the backlog's head is %d", where, r.backlog[0])
		}
		check(t, !(r.queued(x)), "%s: granted while still queued", where)
		mustEqual(t, r.made[x]+1, ev.attempt, "%s: attempt number", where)
		r.retries, r.attempts = r.carried[x], ev.attempt
		delete(r.carried, x)
		delete(r.made, x)
		r.grants++
		r.grantsOf[x]++
		check(t, r.grantsOf[x] <= 1+r.returns[x], "%s: granted again without going back to the backlog", where)
		r.leased, r.offset, r.token = true, x, ev.token
	case worklease.EventEnqueued:
		check(t, r.leased || r.paused || ev.enqueued, "%s: enqueued on an idle, running domain", where)
		check(t, !(terminal || r.queued(x) || r.leased && r.offset == x), "%s: terminal, queued or in flight", where)
		if l.cfg.lifo {
			r.pushFront(x)
		} else {
			r.backlog = append(r.backlog, x)
			r.enqueued = append(r.enqueued, x)
		}
	case worklease.EventOutOfOrder:
		check(t, l.cfg.bestEffort, "%s: without best-effort ordering", where)
		check(t, !(r.leased || r.paused), "%s: domain busy or paused", where)
		check(t, len(r.backlog) > 0 && r.backlog[0] != x, "%s: not out of order", where)
		mustEqual(t, [2]any{worklease.EventAcquired, x}, [2]any{next.kind, next.offset}, "%s: no grant follows", where)
		r.outOfOrderQueued = r.queued(x)
		r.remove(x)
	case worklease.EventProcessed:
		current()
		mustEqual(t, r.attempts, ev.attempt, where)
		r.processed[x] = true
		r.hw = max(r.hw, x)
		r.leased = false
		r.ended++
	case worklease.EventRetrying:
		current()
		mustEqual(t, r.retries+1, ev.attempt, where)
		check(t, ev.attempt <= l.cfg.maxRetries, "%s: more retries than allowed", where)
		r.retries = ev.attempt
		r.attempts++
	case worklease.EventExtended:
		current()
		check(t, l.cfg.ttl > 0, "%s: without a TTL", where)
	case worklease.EventRejected:
		check(t, !(r.leased && ev.token == r.token), "%s: the current token was refused", where)
		if r.leased {
			mustEqual(t, r.offset, x, where)
		} else {
			mustEqual(t, int64(-1), x, where)
		}
	case worklease.EventExpired, worklease.EventReleased:
		current()
		mustEqual(t, r.attempts, ev.attempt, where)
		r.leased = false
		r.ended++
		if ev.kind == worklease.EventReleased {
			// A forced release is not a failed attempt.
			mustEqual(t, [3]any{worklease.EventRequeued, x, ev.attempt}, [3]any{next.kind, next.offset, next.attempt},
				"%s: no requeue follows", where)
			break
		}
		check(t, l.cfg.ttl > 0, "%s: without a TTL", where)
		if next.kind == worklease.EventDeadLettered && next.offset == x && next.token == ev.token {
			mustEqual(t, l.cfg.maxRetries, r.retries, "%s: dead-lettered with retries left", where)
		} else {
			check(t, r.retries < l.cfg.maxRetries, "%s: requeued with no retries left", where)
			mustEqual(t, [3]any{worklease.EventRequeued, x, ev.attempt}, [3]any{next.kind, next.offset, next.attempt},
				"%s: no requeue follows", where)
		}
	case worklease.EventRequeued:
		mustEqual(t, x, prev.offset, where)
		check(t, !(terminal || r.queued(x)), "%s: offset is terminal or queued", where)
		if prev.kind == worklease.EventRetrying {
			// Retry: the holder gave the offset back after the failed
			// attempt the event before counted, as the one after it.
			check(t, r.leased && r.offset == x && r.token == prev.token, "%s: Retry gave back an offset not in flight", where)
			mustEqual(t, r.attempts-1, ev.attempt, "%s: attempts made", where)
			r.leased = false
			r.ended++
			r.pushFront(x)
			r.carried[x], r.made[x] = r.retries, ev.attempt
			r.returns[x]++
			break
		}
		check(t, prev.kind == worklease.EventExpired || prev.kind == worklease.EventReleased, "%s: requeue from nowhere", where)
		r.pushFront(x)
		// Attempt is the attempts made, which the ended lease counted; an
		// expiry is one more failed attempt, a forced release is not.
		mustEqual(t, r.attempts, ev.attempt, "%s: attempts made", where)
		r.carried[x], r.made[x] = r.retries, ev.attempt
		if prev.kind == worklease.EventExpired {
			r.carried[x]++
		}
		r.returns[x]++
	case worklease.EventKilled:
		check(t, !(terminal), "%s: offset is terminal", where)
		mustEqual(t, [4]any{worklease.EventDeadLettered, x, ev.attempt, ev.token}, [4]any{next.kind, next.offset, next.attempt, next.token},
			"%s: no dead letter follows", where)
		switch {
		case r.leased && r.offset == x:
			current()
			mustEqual(t, r.attempts, ev.attempt, where)
			r.leased = false
			r.ended++
		case r.queued(x):
			mustZero(t, ev.token, where)
			mustEqual(t, r.made[x], ev.attempt, "%s: attempts of a queued offset", where)
			delete(r.carried, x)
			delete(r.made, x)
			r.remove(x)
		default:
			mustZero(t, ev.token, where)
			mustZero(t, ev.attempt, "%s: attempts of an offset never seen", where)
		}
	case worklease.EventDeadLettered:
		check(t, !(terminal || r.queued(x)), "%s: offset is terminal or queued", where)
		if r.leased && r.offset == x { // Fail gave up
			current()
			mustEqual(t, r.attempts, ev.attempt, where)
			mustEqual(t, l.cfg.maxRetries, r.retries, "%s: given up with retries left", where)
			r.leased = false
			r.ended++
		} else {
			check(t, prev.kind == worklease.EventKilled || prev.kind == worklease.EventExpired, "%s: dead letter from nowhere", where)
			mustEqual(t, [2]any{x, ev.token}, [2]any{prev.offset, prev.token}, where)
		}
		r.failed[x] = true
		r.hw = max(r.hw, x)
	case worklease.EventCancelled:
		check(t, !(terminal), "%s: offset is terminal", where)
		switch {
		case r.leased && r.offset == x:
			current()
			mustEqual(t, r.attempts, ev.attempt, where)
			r.leased = false
			r.ended++
		case r.queued(x):
			mustZero(t, ev.token, where)
			mustEqual(t, r.made[x], ev.attempt, "%s: attempts of a queued offset", where)
			delete(r.carried, x)
			delete(r.made, x)
			r.remove(x)
		default:
			t.Fatalf("%s: cancelled an offset neither queued nor in flight", where)
		}
		r.processed[x] = true
		r.hw = max(r.hw, x)
	case worklease.EventRedriven:
		check(t, r.failed[x], "%s: offset not failed", where)
		delete(r.failed, x)
		r.pushFront(x)
		r.returns[x]++
	case worklease.EventPaused:
		check(t, !(r.paused), "%s: already paused", where)
		if x != -1 { // parked on a dead letter
			check(t, l.cfg.park, "%s: parked without WithParkOnDeadLetter", where)
			mustEqual(t, [2]any{worklease.EventDeadLettered, x}, [2]any{prev.kind, prev.offset}, "%s: parked with no dead letter", where)
			if i := md.replayed; i >= 2 {
				mustNotEqual(t, worklease.EventKilled, md.events[i-2].kind, "%s: a kill parked the domain", where)
			}
		}
		r.paused = true
	case worklease.EventResumed:
		check(t, r.paused, "%s: not paused", where)
		r.paused = false
	case worklease.EventForgotten:
		check(t, !(r.leased || len(r.backlog) > 0), "%s: forgot a busy domain", where)
		*r = newModelReplay()
	default:
		t.Fatalf("%s", where)
	}
}

func modelBtoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// modelRequireOffsets checks that got lists the offsets of want in the same order;
// nil and empty are the same.
func modelRequireOffsets(t tb, want, got []int64, msgAndArgs ...any) {
	if !slices.Equal(want, got) {
		msg := ""
		if len(msgAndArgs) > 0 {
			msg = fmt.Sprintf(msgAndArgs[0].(string), msgAndArgs[1:]...) + ": "
		}
		t.Fatalf("%sgot %v, want %v", msg, got, want)
	}
}
