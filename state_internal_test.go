package worklease

import (
	"errors"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// These tests drive one domain's state machine directly, as a record does
// under its lock, with a policy and a time of their own. After every call a
// stateRig checks the invariants and replays the call's changes, through a
// journal record each, onto a shadow state, which must then equal the live
// one: what guarantees that a journal rebuilds the state exactly.

const (
	stateSec      = instant(time.Second)
	stateT0       = 1000 * stateSec // when every run starts
	stateTTL      = 10 * time.Second
	stateInstance = 0x5eed
)

var (
	errStateBoom   = errors.New("boom")
	errStateKilled = errors.New("killed by an operator")
	// strangerTok is a token of another domain: never this domain's lease.
	strangerTok = Token{fence: 7, serial: 2, instance: stateInstance}
)

// stateAt returns the instant n seconds after stateT0.
func stateAt(n int64) instant { return stateT0 + instant(n)*stateSec }

// grantTok returns the token of the domain's grant with fence f.
func grantTok(f uint64) Token { return Token{fence: f, serial: 1, instance: stateInstance} }

// A stateCall is one call of the state machine, made under st, with its
// answer: a status or result, an expiry, or nil for the calls that return
// only an error.
type stateCall func(s *domainState, p *policy, st *step) (any, error)

func acquireOf(off int64) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) { return s.acquire(p, st, off) }
}

func succeedOf(tok Token, next bool) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) {
		var res SucceedResult
		if next {
			return res, s.succeedNext(p, st, tok, &res)
		}
		return res, s.succeed(p, st, tok, &res)
	}
}

func failOf(tok Token, cause error, next bool) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) {
		var res FailResult
		if next {
			return res, s.failNext(p, st, tok, cause, &res)
		}
		return res, s.fail(p, st, tok, cause, &res)
	}
}

func extendOf(tok Token, d time.Duration) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) { return s.extend(p, st, tok, d) }
}

// adminOf is an admin call that answers with an error only.
func adminOf(op func(s *domainState, p *policy, st *step) error) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) { return nil, op(s, p, st) }
}

func killOf(off int64, cause error) stateCall {
	return adminOf(func(s *domainState, p *policy, st *step) error { return s.kill(p, st, off, cause) })
}

func redriveOf(off int64) stateCall {
	return adminOf(func(s *domainState, p *policy, st *step) error { return s.redrive(p, st, off) })
}

var forceReleaseCall = adminOf(func(s *domainState, p *policy, st *step) error { return s.forceRelease(p, st) })

func pauseOf(paused bool) stateCall {
	return adminOf(func(s *domainState, p *policy, st *step) error { s.setPaused(p, st, paused); return nil })
}

// forgetCall is Forget.
var forgetCall stateCall = func(s *domainState, p *policy, st *step) (any, error) { return nil, s.forget(p, st) }

func enqueueOf(off int64, payload []byte) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) {
		var put *enqueueData
		if payload != nil {
			put = &enqueueData{payload: payload}
		}
		status, _, _ := s.enqueue(p, st, off, put, 0)
		return status, nil
	}
}

// claimCall is Claim on one domain: whether it granted the head.
var claimCall stateCall = func(s *domainState, p *policy, st *step) (any, error) { return s.claim(p, st), nil }

func retryOf(tok Token, cause error) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) { return s.retry(p, st, tok, cause, 0) }
}

// touchCall is what every other call on a domain does first (Inspect, say):
// it expires the lease if it is due, and reports whether it did.
var touchCall stateCall = func(s *domainState, p *policy, st *step) (any, error) { return s.expireIfDue(p, st), nil }

// A stateRig holds one domain's live state and two others: a twin, which
// makes the same calls without keeping their changes, as a Manager with no
// journal or observer does, and a shadow, which only the live calls'
// changes build, replayed as a journal's records are.
type stateRig struct {
	t                  require.TestingT
	p                  policy
	now                instant
	live, twin, shadow domainState
}

func newStateRig(t require.TestingT, p policy) *stateRig {
	fresh := domainState{issued: issued{fence: 0, serial: 1}}
	return &stateRig{t: t, p: p, now: stateT0, live: fresh, twin: fresh, shadow: fresh}
}

// do makes call at r.now on the live state, keeping its changes, and on
// the twin; it checks that the twin fares alike, that the changes were
// noted whole, replays them onto the shadow, and checks the states.
func (r *stateRig) do(call stateCall) (*step, any, error) {
	st := keptStep(r.now)
	got, err := call(&r.live, &r.p, st)
	twin := &step{now: r.now}
	twinGot, twinErr := call(&r.twin, &r.p, twin)
	require.Equal(r.t, got, twinGot, "answer without keep")
	require.Equal(r.t, err, twinErr, "error without keep")
	require.Nil(r.t, twin.kept, "changes kept without keep")
	require.Equal(r.t, notedKinds(st), notedKinds(twin), "kinds without keep")
	require.Equal(r.t, stateViewOf(&r.p, &r.live), stateViewOf(&r.p, &r.twin), "the state without keep differs")
	r.replay(st)
	return st, got, err
}

// must makes each call, requiring that it succeeds.
func (r *stateRig) must(calls ...stateCall) {
	for i, call := range calls {
		_, _, err := r.do(call)
		require.NoError(r.t, err, "setup call %d", i)
	}
}

// replay applies st's journaled changes to the shadow as Manager.replayRecord
// does a journal's: each through its record, checked by fits first.
func (r *stateRig) replay(st *step) {
	t := r.t
	require.NotNil(t, st.kept, "changes kept")
	for i := range st.n {
		require.Equal(t, st.change(i).kind, st.kind(i), "kind of change %d", i)
	}
	ended := int64(-1) // the offset of a lease the previous change ended without its holder
	for i := range st.n {
		c := st.change(i)
		if ended >= 0 {
			require.True(t, (c.kind == EventRequeued || c.kind == EventDeadLettered) && c.offset == ended,
				"change %d, %v of %d, follows the end of the lease on %d", i, c.kind, c.offset, ended)
		}
		if !c.journaled() || c.kind == EventForgotten { // Forgotten drops the record: the Manager's to replay
			continue
		}
		var rec Record
		setRecord(&rec, c, "d", st.now)
		jc, at := changeOf(&rec), instantOf(rec.At)
		require.NoError(t, r.shadow.fits(&r.p, at, &jc, ended), "change %d, %v of %d, does not fit", i, c.kind, c.offset)
		r.shadow.apply(&r.p, at, &jc)
		ended = -1
		if endsLease(rec) {
			ended = c.offset
		}
	}
	require.Equal(t, int64(-1), ended, "the call ended a lease and left its offset nowhere")
	require.NoError(t, r.live.checkInvariants(&r.p), "live")
	require.NoError(t, r.shadow.checkInvariants(&r.p), "shadow")
	require.Equal(t, stateViewOf(&r.p, &r.live), stateViewOf(&r.p, &r.shadow), "the shadow differs from the live state")
}

// stateProbes is one past the highest offset whose isProcessed a view
// records: the tests draw offsets below it.
const stateProbes = 10

// A stateView is everything observable of a domain's state, in values
// require.Equal compares.
type stateView struct {
	leased, paused bool
	lease          lease
	attempts       int   // with leased
	leaseToken     Token // with leased
	issued         issued
	backlog        []int64
	processed      []offsetRun
	count          int64   // processedCount
	probed         []int64 // the offsets below stateProbes that count as processed
	failed         map[int64]deadView
	carried        map[int64]attempt
	revoked        Token
	revokedWhy     string
	next           int64
	hasNext        bool
}

type deadView struct {
	attempts int
	at       instant
	cause    string
}

func stateViewOf(p *policy, s *domainState) stateView {
	v := stateView{
		leased: s.leased, paused: s.paused, lease: s.lease, issued: s.issued,
		backlog: s.backlog.appendTo(nil), processed: s.processed.runs(), count: s.processedCount(p),
	}
	if s.leased {
		v.attempts, v.leaseToken = s.attempts(), s.leaseToken(p)
	}
	for off := range int64(stateProbes) {
		if s.isProcessed(p, off) {
			v.probed = append(v.probed, off)
		}
	}
	if f := s.failed(); f.len() > 0 {
		v.failed = make(map[int64]deadView)
		for off, dl := range f.m {
			v.failed[off] = deadView{dl.attempts, dl.at, textOf(dl.cause)}
		}
	}
	if s.cold != nil && len(s.cold.carried) > 0 {
		v.carried = maps.Clone(s.cold.carried)
	}
	tok, why := s.revoked()
	v.revoked, v.revokedWhy = tok, textOf(why)
	v.next, v.hasNext = s.next(math.MaxInt64) // as once every schedule is due
	return v
}

// A notedChange is the part of a change the table checks.
type notedChange struct {
	kind      EventKind
	offset    int64
	front     bool
	attempt   int
	retries   int
	fence     uint64
	expiresAt instant
	cause     string
}

func notedChanges(st *step) []notedChange {
	var out []notedChange
	for _, c := range madeOf(st) {
		out = append(out, notedChange{c.kind, c.offset, c.front, c.attempt, c.retries, c.token.fence, c.expiresAt, textOf(c.cause)})
	}
	return out
}

func notedKinds(st *step) []EventKind {
	var out []EventKind
	for i := range st.n {
		out = append(out, st.kind(i))
	}
	return out
}

// requireAnswer checks a call's answer and error; a *BacklogOrderError
// wanted must match in its fields.
func requireStateAnswer(t require.TestingT, want any, wantErr error, got any, err error) {
	var order *BacklogOrderError
	switch {
	case wantErr == nil:
		require.NoError(t, err)
	case errors.As(wantErr, &order):
		var gotOrder *BacklogOrderError
		require.ErrorAs(t, err, &gotOrder)
		require.Equal(t, order, gotOrder)
	default:
		require.ErrorIs(t, err, wantErr)
	}
	require.Equal(t, want, got)
}

// TestStateCalls checks each call's answer and the changes it notes, on
// the main paths; the rig checks that the changes replay to the same state.
func TestStateCalls(t *testing.T) {
	t.Parallel()
	var (
		tok1    = grantTok(1)
		expired = ErrLeaseExpired.Error()
		boom    = errStateBoom.Error()
		killed  = errStateKilled.Error()
		// acquire acquires each offset in turn.
		acquire = func(offs ...int64) func(r *stateRig) {
			return func(r *stateRig) {
				for _, off := range offs {
					r.must(acquireOf(off))
				}
			}
		}
		calling = func(calls ...stateCall) func(r *stateRig) {
			return func(r *stateRig) { r.must(calls...) }
		}
		// then runs setup, then calls.
		then = func(setup func(r *stateRig), calls ...stateCall) func(r *stateRig) {
			return func(r *stateRig) { setup(r); r.must(calls...) }
		}
		// later runs setup, then sets the time to n seconds after the start.
		later = func(setup func(r *stateRig), n int64) func(r *stateRig) {
			return func(r *stateRig) { setup(r); r.now = stateAt(n) }
		}
		ttl      = policy{ttl: stateTTL}
		noSetup  = func(*stateRig) {}
		oneRetry = policy{maxRetries: 1}
	)
	tests := []struct {
		name  string
		p     policy // its instance is set below
		setup func(r *stateRig)
		call  stateCall
		want  any           // the call's answer
		err   error         // matched with errors.Is
		made  []notedChange // in order
	}{
		// TryAcquire.
		{"acquire grants", ttl, noSetup, acquireOf(1), Acquired, nil,
			[]notedChange{{kind: EventAcquired, offset: 1, attempt: 1, fence: 1, expiresAt: stateAt(10)}}},
		{"acquire enqueues", policy{}, acquire(1), acquireOf(2), Enqueued, nil,
			[]notedChange{{kind: EventEnqueued, offset: 2}}},
		{"acquire enqueues at the front with LIFO", policy{lifo: true}, acquire(1, 2), acquireOf(3), Enqueued, nil,
			[]notedChange{{kind: EventEnqueued, offset: 3, front: true}}},
		{"acquire of a queued offset changes nothing", policy{}, acquire(1, 2), acquireOf(2), Enqueued, nil, nil},
		{"acquire of the held offset", policy{}, acquire(1), acquireOf(1), AlreadyAcquired, nil, nil},
		{"acquire of a processed offset", policy{}, then(acquire(1), succeedOf(tok1, false)), acquireOf(1), AlreadyProcessed, nil, nil},
		{"acquire of a failed offset", policy{}, then(acquire(1), failOf(tok1, errStateBoom, false)), acquireOf(1), AlreadyFailed, nil, nil},
		{"acquire below the watermark", policy{monotonic: true}, then(acquire(5), succeedOf(tok1, false)), acquireOf(3), AlreadyProcessed, nil, nil},
		{"acquire out of order, strict", policy{}, then(acquire(1, 2, 3), succeedOf(tok1, false)), acquireOf(3),
			AcquireStatus(0), &BacklogOrderError{Expected: 2, Got: 3}, nil},
		{"acquire out of order, best effort", policy{bestEffort: true}, then(acquire(1, 2, 3), succeedOf(tok1, false)), acquireOf(3), Acquired, nil,
			[]notedChange{{kind: EventOutOfOrder, offset: 3}, {kind: EventAcquired, offset: 3, attempt: 1, fence: 2}}},
		{"acquire on a paused domain queues", policy{}, calling(pauseOf(true)), acquireOf(1), Enqueued, nil,
			[]notedChange{{kind: EventEnqueued, offset: 1}}},
		{"acquire after an expiry regrants", policy{maxRetries: 1, ttl: stateTTL}, later(acquire(1), 10), acquireOf(1), Acquired, nil,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventRequeued, offset: 1, attempt: 1, retries: 1},
				{kind: EventAcquired, offset: 1, attempt: 2, retries: 1, fence: 2, expiresAt: stateAt(20)},
			}},
		{"acquire after an expiry on the last attempt", ttl, later(acquire(1), 10), acquireOf(2), Acquired, nil,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: expired},
				{kind: EventAcquired, offset: 2, attempt: 1, fence: 2, expiresAt: stateAt(20)},
			}},
		{"acquire after an expiry that parks", policy{ttl: stateTTL, park: true}, later(acquire(1, 2), 10), acquireOf(2), Enqueued, nil,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: expired},
				{kind: EventPaused, offset: 1, cause: expired},
			}},

		// Succeed and SucceedNext.
		{"succeed without backlog", policy{}, acquire(1), succeedOf(tok1, false), SucceedResult{Status: NoBacklog}, nil,
			[]notedChange{{kind: EventProcessed, offset: 1, attempt: 1, fence: 1}}},
		{"succeed with backlog hints", policy{}, acquire(1, 2), succeedOf(tok1, false), SucceedResult{Status: NextHint, Next: 2}, nil,
			[]notedChange{{kind: EventProcessed, offset: 1, attempt: 1, fence: 1}}},
		{"succeedNext hands off", policy{}, acquire(1, 2), succeedOf(tok1, true), SucceedResult{Status: NextAcquired}, nil,
			[]notedChange{{kind: EventProcessed, offset: 1, attempt: 1, fence: 1}, {kind: EventAcquired, offset: 2, attempt: 1, fence: 2}}},
		{"succeedNext on a paused domain hints", policy{}, then(acquire(1, 2), pauseOf(true)), succeedOf(tok1, true), SucceedResult{Status: NextHint, Next: 2}, nil,
			[]notedChange{{kind: EventProcessed, offset: 1, attempt: 1, fence: 1}}},

		// Fail and FailNext.
		{"fail retries for at least a TTL", policy{maxRetries: 2, ttl: stateTTL}, later(acquire(1), 5), failOf(tok1, errStateBoom, false),
			FailResult{Status: RetryScheduled, RetryCount: 1}, nil,
			[]notedChange{{kind: EventRetrying, offset: 1, attempt: 1, retries: 1, fence: 1, expiresAt: stateAt(15), cause: boom}}},
		{"fail retries keeping a later expiry", policy{maxRetries: 2, ttl: stateTTL}, then(later(acquire(1), 5), extendOf(tok1, 30*time.Second)), failOf(tok1, nil, false),
			FailResult{Status: RetryScheduled, RetryCount: 1}, nil,
			[]notedChange{{kind: EventRetrying, offset: 1, attempt: 1, retries: 1, fence: 1, expiresAt: stateAt(35)}}},
		{"fail gives up", policy{}, acquire(1), failOf(tok1, errStateBoom, false), FailResult{Status: GiveUpNoBacklog}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: boom}}},
		{"fail gives up after its retries", oneRetry, then(acquire(1), failOf(tok1, nil, false)), failOf(tok1, errStateBoom, false),
			FailResult{Status: GiveUpNoBacklog, RetryCount: 1}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 2, fence: 1, cause: boom}}},
		{"fail gives up and hints", policy{}, acquire(1, 2), failOf(tok1, errStateBoom, false), FailResult{Status: GiveUpNextHint, Next: 2}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: boom}}},
		{"fail gives up and parks", policy{park: true}, acquire(1, 2), failOf(tok1, errStateBoom, false), FailResult{Status: GiveUpParked}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: boom}, {kind: EventPaused, offset: 1, cause: boom}}},
		{"failNext hands off", policy{}, acquire(1, 2), failOf(tok1, errStateBoom, true), FailResult{Status: GiveUpNextAcquired}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: boom}, {kind: EventAcquired, offset: 2, attempt: 1, fence: 2}}},
		{"failNext retrying keeps the lease", oneRetry, acquire(1, 2), failOf(tok1, errStateBoom, true), FailResult{Status: RetryScheduled, RetryCount: 1}, nil,
			[]notedChange{{kind: EventRetrying, offset: 1, attempt: 1, retries: 1, fence: 1, cause: boom}}},

		// Extend.
		{"extend moves the expiry", ttl, later(acquire(1), 5), extendOf(tok1, 20*time.Second), stateAt(25), nil,
			[]notedChange{{kind: EventExtended, offset: 1, attempt: 1, fence: 1, expiresAt: stateAt(25)}}},
		{"extend never shortens", ttl, later(acquire(1), 5), extendOf(tok1, time.Second), stateAt(10), nil, nil},
		{"extend without a TTL", policy{}, acquire(1), extendOf(tok1, time.Second), instant(0), nil, nil},
		{"extend of an expired lease", policy{maxRetries: 1, ttl: stateTTL}, later(acquire(1), 10), extendOf(tok1, time.Second), instant(0), ErrLeaseExpired,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventRequeued, offset: 1, attempt: 1, retries: 1},
				{kind: EventRejected, offset: -1, fence: 1, cause: expired},
			}},

		// Rejected tokens.
		{"succeed with a stranger's token", policy{}, acquire(1), succeedOf(strangerTok, false), SucceedResult{}, ErrTokenMismatch,
			[]notedChange{{kind: EventRejected, offset: 1, fence: 7, cause: ErrTokenMismatch.Error()}}},
		{"extend with the zero token", ttl, acquire(1), extendOf(Token{}, time.Second), instant(0), ErrTokenMismatch,
			[]notedChange{{kind: EventRejected, offset: 1, cause: ErrTokenMismatch.Error()}}},
		{"succeed without a lease", policy{}, then(acquire(1), succeedOf(tok1, false)), succeedOf(tok1, false), SucceedResult{}, ErrNoLease,
			[]notedChange{{kind: EventRejected, offset: -1, fence: 1, cause: ErrNoLease.Error()}}},
		{"fail with a killed lease's token", policy{}, then(acquire(1), killOf(1, errStateKilled)), failOf(tok1, errStateBoom, false), FailResult{}, ErrLeaseRevoked,
			[]notedChange{{kind: EventRejected, offset: -1, fence: 1, cause: ErrLeaseRevoked.Error()}}},
		{"succeed with a released lease's token after a regrant", policy{}, then(acquire(1), forceReleaseCall, acquireOf(1)), succeedOf(tok1, false), SucceedResult{}, ErrLeaseRevoked,
			[]notedChange{{kind: EventRejected, offset: 1, fence: 1, cause: ErrLeaseRevoked.Error()}}},
		{"succeed with an expired lease's token", ttl, later(acquire(1), 10), succeedOf(tok1, false), SucceedResult{}, ErrLeaseExpired,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: expired},
				{kind: EventRejected, offset: -1, fence: 1, cause: expired},
			}},

		// Kill.
		{"kill in flight does not park", policy{park: true}, acquire(1), killOf(1, errStateKilled), nil, nil,
			[]notedChange{
				{kind: EventKilled, offset: 1, attempt: 1, fence: 1, cause: killed},
				{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: killed},
			}},
		{"kill queued", policy{}, acquire(1, 2), killOf(2, errStateKilled), nil, nil,
			[]notedChange{{kind: EventKilled, offset: 2, cause: killed}, {kind: EventDeadLettered, offset: 2, cause: killed}}},
		{"kill queued keeps its attempts", policy{}, then(acquire(1), forceReleaseCall), killOf(1, errStateKilled), nil, nil,
			[]notedChange{{kind: EventKilled, offset: 1, attempt: 1, cause: killed}, {kind: EventDeadLettered, offset: 1, attempt: 1, cause: killed}}},
		{"kill unseen", policy{}, noSetup, killOf(5, errStateKilled), nil, nil,
			[]notedChange{{kind: EventKilled, offset: 5, cause: killed}, {kind: EventDeadLettered, offset: 5, cause: killed}}},
		{"kill unseen ahead of the watermark", policy{monotonic: true}, then(acquire(1), succeedOf(tok1, false)), killOf(5, errStateKilled), nil, ErrOffsetAhead, nil},
		{"kill processed", policy{}, then(acquire(1), succeedOf(tok1, false)), killOf(1, errStateKilled), nil, ErrAlreadyProcessed, nil},
		{"kill failed changes nothing", policy{}, calling(killOf(5, errStateKilled)), killOf(5, errStateBoom), nil, nil, nil},

		// Redrive.
		{"redrive", policy{}, then(acquire(1), failOf(tok1, errStateBoom, false), acquireOf(2)), redriveOf(1), nil, nil,
			[]notedChange{{kind: EventRedriven, offset: 1}}},
		{"redrive of an offset not failed", policy{}, acquire(1), redriveOf(1), nil, ErrNotDeadLettered, nil},

		// ForceRelease.
		{"forceRelease requeues", oneRetry, then(acquire(1), failOf(tok1, nil, false)), forceReleaseCall, nil, nil,
			[]notedChange{{kind: EventReleased, offset: 1, attempt: 2, fence: 1}, {kind: EventRequeued, offset: 1, attempt: 2, retries: 1}}},
		{"forceRelease carries attempts to the next grant", oneRetry, then(acquire(1), failOf(tok1, nil, false), forceReleaseCall), acquireOf(1), Acquired, nil,
			[]notedChange{{kind: EventAcquired, offset: 1, attempt: 3, retries: 1, fence: 2}}},
		{"forceRelease without a lease", policy{}, noSetup, forceReleaseCall, nil, ErrNoLease, nil},

		// Pause and Resume.
		{"pause", policy{}, noSetup, pauseOf(true), nil, nil, []notedChange{{kind: EventPaused, offset: -1}}},
		{"pause when paused", policy{}, calling(pauseOf(true)), pauseOf(true), nil, nil, nil},
		{"resume", policy{}, calling(pauseOf(true)), pauseOf(false), nil, nil, []notedChange{{kind: EventResumed, offset: -1}}},
		{"resume when running", policy{}, noSetup, pauseOf(false), nil, nil, nil},

		// Forget.
		{"forget idle", policy{}, then(acquire(1), succeedOf(tok1, false)), forgetCall, nil, nil, []notedChange{{kind: EventForgotten, offset: -1}}},
		{"forget leased", policy{}, acquire(1), forgetCall, nil, ErrDomainBusy, nil},
		{"forget with a backlog", policy{}, then(acquire(1, 2), succeedOf(tok1, false)), forgetCall, nil, ErrDomainBusy, nil},
		{"forget paused", policy{}, calling(pauseOf(true)), forgetCall, nil, ErrDomainBusy, nil},
		{"forget after an expiry", ttl, later(acquire(1), 10), forgetCall, nil, nil,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: expired},
				{kind: EventForgotten, offset: -1},
			}},
		{"touch before the expiry", ttl, later(acquire(1), 9), touchCall, false, nil, nil},

		// Enqueue.
		{"enqueue never grants", policy{}, noSetup, enqueueOf(1, nil), Enqueued, nil,
			[]notedChange{{kind: EventEnqueued, offset: 1}}},
		{"enqueue queues behind the backlog", policy{}, calling(enqueueOf(1, nil)), enqueueOf(2, []byte("p")), Enqueued, nil,
			[]notedChange{{kind: EventEnqueued, offset: 2}}},
		{"enqueue at the front with LIFO", policy{lifo: true}, calling(enqueueOf(1, nil)), enqueueOf(2, nil), Enqueued, nil,
			[]notedChange{{kind: EventEnqueued, offset: 2, front: true}}},
		{"enqueue of a queued offset changes nothing", policy{}, calling(enqueueOf(1, nil)), enqueueOf(1, []byte("p")), AlreadyQueued, nil, nil},
		{"enqueue of the held offset", policy{}, acquire(1), enqueueOf(1, nil), AlreadyAcquired, nil, nil},
		{"enqueue of a processed offset", policy{}, then(acquire(1), succeedOf(tok1, false)), enqueueOf(1, nil), AlreadyProcessed, nil, nil},
		{"enqueue of a failed offset", policy{}, calling(killOf(1, errStateKilled)), enqueueOf(1, nil), AlreadyFailed, nil, nil},
		{"enqueue below the watermark", policy{monotonic: true}, then(acquire(5), succeedOf(tok1, false)), enqueueOf(3, nil), AlreadyProcessed, nil, nil},
		{"enqueue after an expiry", policy{maxRetries: 1, ttl: stateTTL}, later(acquire(1), 10), enqueueOf(2, nil), Enqueued, nil,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventRequeued, offset: 1, attempt: 1, retries: 1},
				{kind: EventEnqueued, offset: 2},
			}},

		// Claim.
		{"claim grants the head", ttl, calling(enqueueOf(1, nil), enqueueOf(2, nil)), claimCall, true, nil,
			[]notedChange{{kind: EventAcquired, offset: 1, attempt: 1, fence: 1, expiresAt: stateAt(10)}}},
		{"claim of an idle domain without a backlog", policy{}, noSetup, claimCall, false, nil, nil},
		{"claim of a leased domain", policy{}, acquire(1, 2), claimCall, false, nil, nil},
		{"claim of a paused domain", policy{}, calling(enqueueOf(1, nil), pauseOf(true)), claimCall, false, nil, nil},
		{"claim takes over a due lease", policy{maxRetries: 1, ttl: stateTTL}, later(acquire(1), 10), claimCall, true, nil,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventRequeued, offset: 1, attempt: 1, retries: 1},
				{kind: EventAcquired, offset: 1, attempt: 2, retries: 1, fence: 2, expiresAt: stateAt(20)},
			}},

		// Retry.
		{"retry requeues at the front", oneRetry, acquire(1, 2), retryOf(tok1, errStateBoom), RetryResult{RetryCount: 1}, nil,
			[]notedChange{
				{kind: EventRetrying, offset: 1, attempt: 1, retries: 1, fence: 1, cause: boom},
				{kind: EventRequeued, offset: 1, attempt: 1, retries: 1},
			}},
		{"retry keeps the expiry in its record", policy{maxRetries: 1, ttl: stateTTL}, later(acquire(1), 5), retryOf(tok1, nil), RetryResult{RetryCount: 1}, nil,
			[]notedChange{
				{kind: EventRetrying, offset: 1, attempt: 1, retries: 1, fence: 1, expiresAt: stateAt(10)},
				{kind: EventRequeued, offset: 1, attempt: 1, retries: 1},
			}},
		{"retry carries attempts to the next claim", oneRetry, then(acquire(1), retryOf(tok1, nil)), claimCall, true, nil,
			[]notedChange{{kind: EventAcquired, offset: 1, attempt: 2, retries: 1, fence: 2}}},
		{"retry after a forced release", policy{maxRetries: 2}, then(acquire(1), forceReleaseCall, acquireOf(1)), retryOf(grantTok(2), nil), RetryResult{RetryCount: 1}, nil,
			[]notedChange{
				{kind: EventRetrying, offset: 1, attempt: 1, retries: 1, fence: 2},
				{kind: EventRequeued, offset: 1, attempt: 2, retries: 1},
			}},
		{"retry gives up", policy{}, acquire(1, 2), retryOf(tok1, errStateBoom), RetryResult{DeadLettered: true, RetryCount: 1}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: boom}}},
		{"retry gives up after its retries", oneRetry, then(acquire(1), failOf(tok1, nil, false)), retryOf(tok1, errStateBoom),
			RetryResult{DeadLettered: true, RetryCount: 2}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 2, fence: 1, cause: boom}}},
		{"retry gives up and parks", policy{park: true}, acquire(1, 2), retryOf(tok1, errStateBoom), RetryResult{DeadLettered: true, RetryCount: 1}, nil,
			[]notedChange{{kind: EventDeadLettered, offset: 1, attempt: 1, fence: 1, cause: boom}, {kind: EventPaused, offset: 1, cause: boom}}},
		{"retry with a stranger's token", oneRetry, acquire(1), retryOf(strangerTok, nil), RetryResult{}, ErrTokenMismatch,
			[]notedChange{{kind: EventRejected, offset: 1, fence: 7, cause: ErrTokenMismatch.Error()}}},
		{"retry with a retried lease's token", oneRetry, then(acquire(1), retryOf(tok1, nil)), retryOf(tok1, nil), RetryResult{}, ErrNoLease,
			[]notedChange{{kind: EventRejected, offset: -1, fence: 1, cause: ErrNoLease.Error()}}},
		{"retry with an expired lease's token", policy{maxRetries: 1, ttl: stateTTL}, later(acquire(1), 10), retryOf(tok1, nil), RetryResult{}, ErrLeaseExpired,
			[]notedChange{
				{kind: EventExpired, offset: 1, attempt: 1, fence: 1},
				{kind: EventRequeued, offset: 1, attempt: 1, retries: 1},
				{kind: EventRejected, offset: -1, fence: 1, cause: expired},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.p.instance = stateInstance
			r := newStateRig(t, tc.p)
			tc.setup(r)
			st, got, err := r.do(tc.call)
			requireStateAnswer(t, tc.want, tc.err, got, err)
			require.Equal(t, tc.made, notedChanges(st))
		})
	}
}

func claimNextOf(tok Token) stateCall {
	return func(s *domainState, p *policy, st *step) (any, error) { return s.claimNext(p, st, tok) }
}

// TestStateClaimNext checks ClaimNext's chaining: each success leases the
// domain's next offset, a repeat with the token it ended answers with the
// same lease and changes nothing, and after MaxStreak leases in a row the
// domain claims nothing until Claim starts its streak over.
func TestStateClaimNext(t *testing.T) {
	t.Parallel()
	r := newStateRig(t, policy{maxRetries: 1, instance: stateInstance})
	for off := range int64(MaxStreak + 3) {
		r.must(enqueueOf(off, nil))
	}
	_, got, err := r.do(claimCall)
	require.NoError(t, err)
	require.Equal(t, true, got)
	for i := range MaxStreak {
		tok := grantTok(uint64(i + 1))
		_, got, err := r.do(claimNextOf(tok))
		require.NoError(t, err)
		require.Equal(t, true, got, "lease %d of the streak", i+1)
		require.Equal(t, int64(i+1), r.live.lease.offset)
		st, got, err := r.do(claimNextOf(tok)) // repeated, as after a lost answer
		require.NoError(t, err)
		require.Equal(t, true, got)
		require.Zero(t, st.n, "a repeat changes nothing")
	}
	_, got, err = r.do(claimNextOf(grantTok(MaxStreak + 1)))
	require.NoError(t, err)
	require.Equal(t, false, got, "the streak is spent")
	require.False(t, r.live.leased)
	_, got, err = r.do(claimCall)
	require.NoError(t, err)
	require.Equal(t, true, got)
	_, got, err = r.do(claimNextOf(grantTok(MaxStreak + 2)))
	require.NoError(t, err)
	require.Equal(t, true, got, "Claim started the streak over")
}

// A stateModel is the contract of one domain, kept as plainly as it reads:
// a lease or none, the backlog as a slice, the terminal offsets in maps (or
// a watermark), and what carries over. Its calls return the answer the
// state machine's must, and note the kinds of the changes it must make.
type stateModel struct {
	p      *policy
	now    instant
	fence  uint64 // the latest grant's
	leased bool
	lease  modelLease
	// backlog is front first.
	backlog []int64
	done    map[int64]bool // succeeded offsets, without monotonic
	hw      int64          // with monotonic, the highest terminal offset; -1 for none
	failed  map[int64]deadView
	carried map[int64]attempt
	paused  bool
	// revoked is the latest lease that ended without its holder.
	revoked    Token
	revokedErr error
	payloads   map[int64]string // what Enqueue stored, until the offset succeeds
	kinds      []EventKind      // the current call's changes
}

type modelLease struct {
	offset              int64
	tok                 Token
	attempts, retries   int
	acquiredAt, expires instant
}

func newStateModel(p *policy) *stateModel {
	return &stateModel{p: p, done: map[int64]bool{}, hw: -1, failed: map[int64]deadView{}, carried: map[int64]attempt{}, payloads: map[int64]string{}}
}

func (m *stateModel) note(k EventKind) { m.kinds = append(m.kinds, k) }

func (m *stateModel) queued(off int64) bool { return slices.Contains(m.backlog, off) }

func (m *stateModel) inFlight(off int64) bool { return m.leased && m.lease.offset == off }

func (m *stateModel) isProcessed(off int64) bool {
	if !m.p.monotonic {
		return m.done[off]
	}
	_, failed := m.failed[off]
	return off <= m.hw && !failed && !m.inFlight(off) && !m.queued(off)
}

func (m *stateModel) terminal(off int64, succeeded bool) {
	if m.p.monotonic {
		m.hw = max(m.hw, off)
	} else if succeeded {
		m.done[off] = true
	}
}

func (m *stateModel) unqueue(off int64) {
	m.backlog = slices.DeleteFunc(m.backlog, func(x int64) bool { return x == off })
	delete(m.carried, off)
}

// grant leases off under a new token, carrying on the attempts it made
// before, if any.
func (m *stateModel) grant(off int64) {
	l := modelLease{offset: off, attempts: 1, acquiredAt: m.now}
	if a, ok := m.carried[off]; ok {
		l.attempts, l.retries, l.acquiredAt = a.attempts+1, a.retries, a.acquiredAt
	}
	if m.p.ttl > 0 {
		l.expires = m.now + instant(m.p.ttl)
	}
	m.unqueue(off)
	m.fence++
	l.tok = grantTok(m.fence)
	m.leased, m.lease = true, l
	m.note(EventAcquired)
}

// endLease ends the lease without its holder, who learns why from then on.
func (m *stateModel) endLease(why error) {
	m.revoked, m.revokedErr = m.lease.tok, why
	m.leased = false
}

func (m *stateModel) requeue(off int64, a attempt) {
	m.backlog = slices.Insert(m.backlog, 0, off)
	m.carried[off] = a
	m.note(EventRequeued)
}

func (m *stateModel) deadLetter(off int64, attempts int, cause error, park bool) {
	m.note(EventDeadLettered)
	if m.inFlight(off) {
		m.leased = false
	}
	m.unqueue(off)
	m.failed[off] = deadView{attempts, m.now, textOf(cause)}
	m.terminal(off, false)
	if park && !m.paused {
		m.paused = true
		m.note(EventPaused)
	}
}

func (m *stateModel) expire() bool {
	l := m.lease
	if !m.leased || l.expires == 0 || m.now < l.expires {
		return false
	}
	m.note(EventExpired)
	m.endLease(ErrLeaseExpired)
	if l.retries < m.p.maxRetries {
		m.requeue(l.offset, attempt{attempts: l.attempts, retries: l.retries + 1, acquiredAt: l.acquiredAt})
	} else {
		m.deadLetter(l.offset, l.attempts, ErrLeaseExpired, m.p.park)
	}
	return true
}

func (m *stateModel) acquire(off int64) (any, error) {
	m.expire()
	_, failed := m.failed[off]
	switch {
	case m.isProcessed(off):
		return AlreadyProcessed, nil
	case failed:
		return AlreadyFailed, nil
	case m.inFlight(off):
		return AlreadyAcquired, nil
	case m.leased || m.paused:
		if !m.queued(off) {
			if m.p.lifo {
				m.backlog = slices.Insert(m.backlog, 0, off)
			} else {
				m.backlog = append(m.backlog, off)
			}
			m.note(EventEnqueued)
		}
		return Enqueued, nil
	}
	if len(m.backlog) > 0 && m.backlog[0] != off {
		if !m.p.bestEffort {
			return AcquireStatus(0), &BacklogOrderError{Expected: m.backlog[0], Got: off}
		}
		m.note(EventOutOfOrder)
	}
	m.grant(off)
	return Acquired, nil
}

func (m *stateModel) check(tok Token) error {
	var err error
	switch {
	case m.leased && tok == m.lease.tok:
		return nil
	case !tok.IsZero() && tok == m.revoked:
		err = m.revokedErr
	case !m.leased:
		err = ErrNoLease
	default:
		err = ErrTokenMismatch
	}
	m.note(EventRejected)
	return err
}

func (m *stateModel) succeed(tok Token, next bool) (any, error) {
	m.expire()
	if err := m.check(tok); err != nil {
		return SucceedResult{}, err
	}
	m.note(EventProcessed)
	m.terminal(m.lease.offset, true)
	delete(m.payloads, m.lease.offset)
	m.leased = false
	switch {
	case len(m.backlog) == 0:
		return SucceedResult{Status: NoBacklog}, nil
	case next && !m.paused:
		m.grant(m.backlog[0])
		return SucceedResult{Status: NextAcquired}, nil
	}
	return SucceedResult{Status: NextHint, Next: m.backlog[0]}, nil
}

func (m *stateModel) fail(tok Token, cause error, next bool) (any, error) {
	m.expire()
	if err := m.check(tok); err != nil {
		return FailResult{}, err
	}
	l := &m.lease
	if l.retries < m.p.maxRetries {
		l.retries++
		l.attempts++
		if m.p.ttl > 0 {
			l.expires = max(l.expires, m.now+instant(m.p.ttl))
		}
		m.note(EventRetrying)
		return FailResult{Status: RetryScheduled, RetryCount: l.retries}, nil
	}
	res := FailResult{RetryCount: l.retries}
	m.deadLetter(l.offset, l.attempts, cause, m.p.park)
	switch {
	case m.paused:
		res.Status = GiveUpParked
	case len(m.backlog) == 0:
		res.Status = GiveUpNoBacklog
	case next:
		m.grant(m.backlog[0])
		res.Status = GiveUpNextAcquired
	default:
		res.Status, res.Next = GiveUpNextHint, m.backlog[0]
	}
	return res, nil
}

func (m *stateModel) extend(tok Token, d time.Duration) (any, error) {
	m.expire()
	if err := m.check(tok); err != nil {
		return instant(0), err
	}
	if m.lease.expires == 0 {
		return instant(0), nil
	}
	if at := m.now + instant(d); at > m.lease.expires {
		m.lease.expires = at
		m.note(EventExtended)
	}
	return m.lease.expires, nil
}

func (m *stateModel) kill(off int64, cause error) (any, error) {
	m.expire()
	_, failed := m.failed[off]
	switch {
	case m.isProcessed(off):
		return nil, ErrAlreadyProcessed
	case failed:
		return nil, nil
	case m.p.monotonic && !m.inFlight(off) && !m.queued(off):
		return nil, ErrOffsetAhead
	}
	m.note(EventKilled)
	attempts := m.carried[off].attempts // 0 unless it carries some
	if m.inFlight(off) {
		attempts = m.lease.attempts
		m.endLease(ErrLeaseRevoked)
	}
	m.deadLetter(off, attempts, cause, false)
	return nil, nil
}

func (m *stateModel) redrive(off int64) (any, error) {
	m.expire()
	if _, failed := m.failed[off]; !failed {
		return nil, ErrNotDeadLettered
	}
	delete(m.failed, off)
	m.backlog = slices.Insert(m.backlog, 0, off)
	m.note(EventRedriven)
	return nil, nil
}

func (m *stateModel) forceRelease() (any, error) {
	m.expire()
	if !m.leased {
		return nil, ErrNoLease
	}
	l := m.lease
	m.note(EventReleased)
	m.endLease(ErrLeaseRevoked)
	m.requeue(l.offset, attempt{attempts: l.attempts, retries: l.retries, acquiredAt: l.acquiredAt})
	return nil, nil
}

func (m *stateModel) setPaused(paused bool) (any, error) {
	m.expire()
	switch {
	case m.paused == paused:
	case paused:
		m.note(EventPaused)
	default:
		m.note(EventResumed)
	}
	m.paused = paused
	return nil, nil
}

func (m *stateModel) forget() (any, error) {
	m.expire()
	if m.leased || len(m.backlog) > 0 || m.paused {
		return nil, ErrDomainBusy
	}
	m.note(EventForgotten)
	return nil, nil
}

func (m *stateModel) enqueue(off int64, payload []byte) (any, error) {
	m.expire()
	_, failed := m.failed[off]
	switch {
	case m.isProcessed(off):
		return AlreadyProcessed, nil
	case failed:
		return AlreadyFailed, nil
	case m.inFlight(off):
		return AlreadyAcquired, nil
	case m.queued(off):
		return AlreadyQueued, nil
	}
	if m.p.lifo {
		m.backlog = slices.Insert(m.backlog, 0, off)
	} else {
		m.backlog = append(m.backlog, off)
	}
	if payload != nil {
		m.payloads[off] = string(payload)
	}
	m.note(EventEnqueued)
	return Enqueued, nil
}

func (m *stateModel) claim() (any, error) {
	m.expire()
	if m.leased || m.paused || len(m.backlog) == 0 {
		return false, nil
	}
	m.grant(m.backlog[0])
	return true, nil
}

func (m *stateModel) retry(tok Token, cause error) (any, error) {
	m.expire()
	if err := m.check(tok); err != nil {
		return RetryResult{}, err
	}
	l := m.lease
	if l.retries >= m.p.maxRetries {
		m.deadLetter(l.offset, l.attempts, cause, m.p.park)
		return RetryResult{DeadLettered: true, RetryCount: l.retries + 1}, nil
	}
	m.note(EventRetrying)
	m.leased = false // ended by its holder: nothing revoked
	m.requeue(l.offset, attempt{attempts: l.attempts, retries: l.retries + 1, acquiredAt: l.acquiredAt})
	return RetryResult{RetryCount: l.retries + 1}, nil
}

// payloadsOf returns the payloads s keeps, as the model keeps them.
func payloadsOf(s *domainState) map[int64]string {
	out := map[int64]string{}
	if s.cold != nil {
		for off, p := range s.cold.payloads {
			out[off] = string(p.data)
		}
	}
	return out
}

// view is the model's stateView, which the state's must equal.
func (m *stateModel) view() stateView {
	v := stateView{leased: m.leased, paused: m.paused, issued: issued{fence: m.fence, serial: 1}}
	if m.leased {
		l := m.lease
		v.lease = lease{offset: l.offset, acquiredAt: l.acquiredAt, expiresAt: l.expires, retries: l.retries}
		v.attempts, v.leaseToken = l.attempts, l.tok
	}
	if len(m.backlog) > 0 {
		v.backlog = slices.Clone(m.backlog)
	}
	if m.p.monotonic {
		if m.hw >= 0 {
			v.processed = []offsetRun{{0, m.hw}}
		}
		for off := range m.hw + 1 {
			if m.isProcessed(off) {
				v.count++
			}
		}
	} else {
		for _, off := range slices.Sorted(maps.Keys(m.done)) {
			if n := len(v.processed); n > 0 && v.processed[n-1].hi == off-1 {
				v.processed[n-1].hi = off
			} else {
				v.processed = append(v.processed, offsetRun{off, off})
			}
		}
		v.count = int64(len(m.done))
	}
	for off := range int64(stateProbes) {
		if m.isProcessed(off) {
			v.probed = append(v.probed, off)
		}
	}
	if len(m.failed) > 0 {
		v.failed = maps.Clone(m.failed)
	}
	if len(m.carried) > 0 {
		v.carried = maps.Clone(m.carried)
	}
	v.revoked, v.revokedWhy = m.revoked, textOf(m.revokedErr)
	if !m.leased && !m.paused && len(m.backlog) > 0 {
		v.next, v.hasNext = m.backlog[0], true
	}
	return v
}

// TestStateModel drives one domain's state machine and stateModel with the
// same calls under a drawn policy, and checks after every step that they
// agree: in the answer, in the kinds of the changes, and in the state. The
// rig checks the invariants and that the changes, replayed alone, rebuild
// the state.
func TestStateModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		p := policy{
			maxRetries: rapid.IntRange(0, 3).Draw(t, "maxRetries"),
			ttl:        rapid.SampledFrom([]time.Duration{0, stateTTL}).Draw(t, "ttl"),
			lifo:       rapid.Bool().Draw(t, "lifo"),
			bestEffort: rapid.Bool().Draw(t, "bestEffort"),
			park:       rapid.Bool().Draw(t, "park"),
			monotonic:  rapid.Bool().Draw(t, "monotonic"),
			instance:   stateInstance,
		}
		r := newStateRig(t, p)
		m := newStateModel(&r.p)
		offset := rapid.Int64Range(0, stateProbes-3)
		cause := rapid.SampledFrom([]error{nil, errStateBoom})
		token := func(t *rapid.T) Token {
			switch rapid.IntRange(0, 5).Draw(t, "which token") {
			case 0:
				return Token{}
			case 1:
				return strangerTok
			case 2:
				return grantTok(rapid.Uint64Range(1, m.fence+1).Draw(t, "fence")) // fence+1: not issued yet
			}
			return grantTok(m.fence) // the latest grant's
		}
		// run makes the same call on the state and the model.
		run := func(t *rapid.T, call stateCall, model func() (any, error)) {
			m.now, m.kinds = r.now, nil
			st, got, err := r.do(call)
			want, wantErr := model()
			requireStateAnswer(t, want, wantErr, got, err)
			require.Equal(t, m.kinds, notedKinds(st), "kinds of the changes")
		}
		t.Repeat(map[string]func(*rapid.T){
			"acquire": func(t *rapid.T) {
				off := offset.Draw(t, "offset")
				run(t, acquireOf(off), func() (any, error) { return m.acquire(off) })
			},
			"succeed": func(t *rapid.T) {
				tok, next := token(t), rapid.Bool().Draw(t, "next")
				run(t, succeedOf(tok, next), func() (any, error) { return m.succeed(tok, next) })
			},
			"fail": func(t *rapid.T) {
				tok, cause, next := token(t), cause.Draw(t, "cause"), rapid.Bool().Draw(t, "next")
				run(t, failOf(tok, cause, next), func() (any, error) { return m.fail(tok, cause, next) })
			},
			"extend": func(t *rapid.T) {
				tok := token(t)
				d := time.Duration(rapid.IntRange(1, 20).Draw(t, "seconds")) * time.Second
				run(t, extendOf(tok, d), func() (any, error) { return m.extend(tok, d) })
			},
			"kill": func(t *rapid.T) {
				off, cause := offset.Draw(t, "offset"), cause.Draw(t, "cause")
				run(t, killOf(off, cause), func() (any, error) { return m.kill(off, cause) })
			},
			"redrive": func(t *rapid.T) {
				off := offset.Draw(t, "offset")
				run(t, redriveOf(off), func() (any, error) { return m.redrive(off) })
			},
			"forceRelease": func(t *rapid.T) { run(t, forceReleaseCall, m.forceRelease) },
			"pause": func(t *rapid.T) {
				paused := rapid.Bool().Draw(t, "paused")
				run(t, pauseOf(paused), func() (any, error) { return m.setPaused(paused) })
			},
			"forget": func(t *rapid.T) { run(t, forgetCall, m.forget) },
			"enqueue": func(t *rapid.T) {
				off := offset.Draw(t, "offset")
				payload := rapid.SampledFrom([][]byte{nil, []byte("p"), {}}).Draw(t, "payload")
				run(t, enqueueOf(off, payload), func() (any, error) { return m.enqueue(off, payload) })
			},
			"claim": func(t *rapid.T) { run(t, claimCall, m.claim) },
			"retry": func(t *rapid.T) {
				tok, cause := token(t), cause.Draw(t, "cause")
				run(t, retryOf(tok, cause), func() (any, error) { return m.retry(tok, cause) })
			},
			"touch": func(t *rapid.T) { run(t, touchCall, func() (any, error) { return m.expire(), nil }) },
			"advance": func(t *rapid.T) {
				r.now += instant(rapid.IntRange(0, 12).Draw(t, "seconds")) * stateSec
			},
			"": func(t *rapid.T) {
				require.Equal(t, m.view(), stateViewOf(&r.p, &r.live), "the state differs from the model")
				require.Equal(t, m.payloads, payloadsOf(&r.live), "the payloads differ from the model's")
			},
		})
	})
}

// keptStep returns a step at now that keeps its changes.
func keptStep(now instant) *step {
	return &step{now: now, kept: new([stepInline]change)}
}

// madeOf returns the changes st kept, in order.
func madeOf(st *step) []change {
	var out []change
	for i := range st.n {
		out = append(out, *st.change(i))
	}
	return out
}
