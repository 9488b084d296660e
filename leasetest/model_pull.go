package leasetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/worklease/worklease"
)

// The model of the pull calls: Enqueue, Claim, Retry, SucceedMany and
// ClaimNext.
//
// Claim's choice is not wholly fixed by the contract, so the model checks
// it rather than predicting it, and then follows the backend: the domains
// whose leases were due that it took over, and those it claimed, must be
// ones the contract allows, in an order it allows; the model then makes
// the same moves. What the contract leaves open: the order of domains
// that became ready at the same instant; the order of those that became
// ready before the backend's first pull call since it started (it may not
// note when a domain becomes ready until then), which come before the
// others; and the streaks of ClaimNext in the cases
// modelDomain.claimNext lists. A domain is claimable from when it became
// ready, or, if its backlog's head is scheduled for later or waits out a
// retry's delay, from when that ends (see modelDomain.readyAt); when what
// holds it back changes while it stays ready, it waits until the later
// time, or, if that ended early, it is ready from then on.

// modelReady is a domain's place among the domains Claim may lease.
type modelReady struct {
	listed bool      // the domain is ready: idle, running, with a backlog
	at     time.Time // since when, or when its retry delay ends
	// unranked: the domain became ready before the backend's first pull
	// call since it started: it is claimed before those that became
	// ready later, in any order among the unranked ones.
	unranked bool
}

// claimable reports whether Claim at now must consider the domain, and
// may reports whether it may.
func (r *modelReady) claimable(now time.Time) (must, may bool) {
	if !r.listed {
		return false, false
	}
	must = !now.Before(r.at)
	return must, must
}

// ranksBefore reports whether the contract puts r strictly before o among
// the domains ready for a claim.
func (r *modelReady) ranksBefore(o *modelReady) bool {
	if r.unranked && o.unranked {
		return false
	}
	return r.at.Before(o.at)
}

// headWaits reports whether the backlog's head is scheduled for after now:
// the domain grants nothing until then.
func (md *modelDomain) headWaits(now time.Time) bool {
	return len(md.backlog) > 0 && md.scheduled[md.backlog[0]].After(now)
}

// readyAt is when a ready domain may be claimed at the earliest: when its
// head's schedule, or its retry delay, ends; zero for at once.
func (md *modelDomain) readyAt() time.Time {
	at := md.retryAt
	if len(md.backlog) > 0 {
		if s := md.scheduled[md.backlog[0]]; s.After(at) {
			at = s
		}
	}
	return at
}

// ready reports whether the domain is one Claim may lease, delay aside.
func (md *modelDomain) isReady() bool { return !md.leased && !md.paused && len(md.backlog) > 0 }

// syncReady lists each domain that became ready, as ready at now (or once
// the delay Retry just gave it ends), and delists each that stopped being
// ready: what the backend does as each call ends. A domain that stays
// ready keeps its place.
func (l *leaseModel) syncReady(now time.Time) {
	for _, d := range modelAllDomains {
		md := l.domains[d]
		due := md.readyAt()
		at := now
		if due.After(now) {
			at = due
		}
		switch ready := md.isReady(); {
		case ready && !md.ready.listed:
			md.ready = modelReady{listed: true, at: at, unranked: !l.pulling}
		case ready && due.After(md.ready.at): // held back longer
			md.ready = modelReady{listed: true, at: due, unranked: !l.pulling}
		case ready && md.ready.at.After(now) && due.Before(md.ready.at): // held back no more, or less
			md.ready = modelReady{listed: true, at: at, unranked: !l.pulling}
		case !ready:
			md.ready = modelReady{}
		}
	}
}

// restarted notes a restart: the backend may have lost when its domains
// became ready, and ClaimNext's streaks. Schedules and retry delays are
// kept.
func (l *leaseModel) restarted() {
	l.pulling = false
	for _, md := range l.domains {
		if md.ready.listed {
			md.ready.unranked = true
		}
		md.streakUnsure = md.streakUnsure || md.streak > 0
		md.streak = 0
		md.chainedUnsure = !md.chainedFrom.IsZero()
	}
}

// claimNext is the model's answer to ClaimNext of tok's lease, the only
// claim of its domain in the call: Succeed's error, and whether the
// backend may and must lease the domain's next offset to the caller. It
// must when the domain has one queued, is not paused, and ClaimNext
// leased it fewer than MaxStreak times in a row since the domain's last
// claim, or SucceedMany or ClaimNext ended a lease without a next one.
//
// The model counts a streak as the in-memory Manager does, which is the
// least a backend may count. The PostgreSQL backend counts on across a
// claim that first took over due leases, a Forget and a restart, where
// the Manager starts again from 0: after those, while the model's count is
// below MaxStreak, the backend may also lease nothing.
func (md *modelDomain) claimNext(tok worklease.Token, now time.Time) (may, must bool, err error) {
	if _, err := md.succeed(tok, now); err != nil {
		return false, false, err
	}
	may = !md.paused && len(md.backlog) > 0 && !md.headWaits(now) && md.streak < worklease.MaxStreak
	return may, may && !md.streakUnsure, nil
}

// repeats reports whether ClaimNext of tok is one repeated after its next
// lease was granted, which the backend answers with that lease again
// (sure), or may (maybe: it restarted since), once a due lease is revoked.
func (md *modelDomain) repeats(tok worklease.Token, now time.Time) (sure, maybe bool) {
	if !md.created {
		return false, false
	}
	md.touch(now)
	if !md.leased || md.chainedFrom.IsZero() || tok != md.chainedFrom {
		return false, false
	}
	if tok.Instance() != md.lease.token.Instance() {
		return false, false // granted under another instance, before a restart: no repeat
	}
	return !md.chainedUnsure, md.chainedUnsure
}

// enqueue is Enqueue on the model, and EnqueueAt with notBefore:
// TryAcquire that never grants, and says which state an offset the domain
// holds is in, or that it holds it with another payload.
func (md *modelDomain) enqueue(off int64, payload []byte, notBefore, now time.Time) (worklease.AcquireStatus, error) {
	md.created = true
	md.touch(now)
	var held worklease.AcquireStatus
	switch {
	case md.isProcessed(off):
		return worklease.AlreadyProcessed, nil
	case modelHas(md.failed, off):
		held = worklease.AlreadyFailed
	case md.leased && off == md.lease.offset:
		held = worklease.AlreadyAcquired
	case slices.Contains(md.backlog, off):
		held = worklease.AlreadyQueued
	}
	if held != 0 {
		if stored, ok := md.payloads[off]; ok != (payload != nil) || stored != string(payload) {
			return 0, worklease.ErrPayloadMismatch
		}
		return held, nil
	}
	if md.cfg.lifo {
		md.backlog = slices.Insert(md.backlog, 0, off)
	} else {
		md.backlog = append(md.backlog, off)
	}
	if payload != nil {
		md.payloads[off] = string(payload)
	}
	if notBefore.After(now) {
		md.scheduled[off] = notBefore
	}
	md.events = append(md.events, modelEvent{kind: worklease.EventEnqueued, offset: off, at: now, enqueued: true})
	return worklease.Enqueued, nil
}

// holds reports whether the domain holds off queued, in flight or failed.
func (md *modelDomain) holds(off int64) bool {
	return slices.Contains(md.backlog, off) || md.leased && md.lease.offset == off || modelHas(md.failed, off)
}

// A modelKey is what an idempotency key remembers of its Append.
type modelKey struct {
	offset     int64
	payload    string
	hasPayload bool
	at         time.Time
}

// appendNext is Append on the model: the next offset after every one the
// domain holds, or, for a key within its window, the first Append's.
func (md *modelDomain) appendNext(payload []byte, key string, notBefore, now time.Time) (worklease.AppendResult, error) {
	md.created = true
	md.touch(now)
	if k, ok := md.keys[key]; ok && key != "" && now.Before(k.at.Add(md.cfg.keyWindow())) {
		if k.hasPayload != (payload != nil) || k.payload != string(payload) {
			return worklease.AppendResult{}, worklease.ErrPayloadMismatch
		}
		return worklease.AppendResult{Offset: k.offset, Status: md.stateOf(k.offset)}, nil
	}
	top := md.hw
	for off := range md.processed {
		top = max(top, off)
	}
	for off := range md.failed {
		top = max(top, off)
	}
	for _, off := range md.backlog {
		top = max(top, off)
	}
	if md.leased {
		top = max(top, md.lease.offset)
	}
	if top == math.MaxInt64 {
		return worklease.AppendResult{}, worklease.ErrInvalidOffset
	}
	st, err := md.enqueue(top+1, payload, notBefore, now)
	if err != nil || st != worklease.Enqueued {
		panic(fmt.Sprintf("model: Append's offset %d was held: %v, %v", top+1, st, err))
	}
	if key != "" {
		md.keys[key] = modelKey{offset: top + 1, payload: string(payload), hasPayload: payload != nil, at: now}
	}
	return worklease.AppendResult{Offset: top + 1, Status: worklease.Enqueued}, nil
}

// stateOf is the status of an offset the domain holds, as a repeated
// Append reports it.
func (md *modelDomain) stateOf(off int64) worklease.AcquireStatus {
	switch {
	case md.leased && md.lease.offset == off:
		return worklease.AlreadyAcquired
	case modelHas(md.failed, off):
		return worklease.AlreadyFailed
	case slices.Contains(md.backlog, off):
		return worklease.AlreadyQueued
	}
	return worklease.AlreadyProcessed
}

// cancel is Cancel on the model; it returns the head, as the admin calls
// do.
func (md *modelDomain) cancel(off int64, inFlight bool, now time.Time) (int64, bool, error) {
	if off < 0 {
		return 0, false, worklease.ErrInvalidOffset
	}
	if !md.created {
		return 0, false, worklease.ErrNotQueued
	}
	md.touch(now)
	switch i := slices.Index(md.backlog, off); {
	case md.isProcessed(off):
		return 0, false, worklease.ErrAlreadyProcessed
	case md.leased && md.lease.offset == off:
		if !inFlight {
			return 0, false, worklease.ErrInFlight
		}
		l := md.lease
		md.emit(worklease.EventCancelled, off, l.attempts, l.token, nil, now)
		md.endLease(l.token, worklease.ErrLeaseRevoked)
	case i >= 0:
		md.emit(worklease.EventCancelled, off, md.carried[off].attempts, worklease.Token{}, nil, now)
		md.unqueue(i)
	default:
		return 0, false, worklease.ErrNotQueued
	}
	md.processed[off], md.cancelled[off] = true, true
	md.hw = max(md.hw, off)
	delete(md.payloads, off)
	next, ok := md.next(now)
	return next, ok, nil
}

// retry is Retry on the model.
func (md *modelDomain) retry(tok worklease.Token, cause error, delay time.Duration, now time.Time) (worklease.RetryResult, error) {
	if delay < 0 {
		return worklease.RetryResult{}, worklease.ErrInvalidDuration
	}
	if !md.created {
		return worklease.RetryResult{}, worklease.ErrNoLease
	}
	md.touch(now)
	if err := md.checkToken(tok, now); err != nil {
		return worklease.RetryResult{}, err
	}
	cause = modelKeptCause(cause)
	l := md.lease
	if l.retries >= md.cfg.maxRetries {
		md.deadLetter(l.offset, l.attempts, tok, cause, now, md.cfg.park)
		md.leased, md.lease = false, modelLease{}
		return worklease.RetryResult{DeadLettered: true, RetryCount: l.retries + 1}, nil
	}
	md.emit(worklease.EventRetrying, l.offset, l.retries+1, tok, cause, now)
	md.leased, md.lease = false, modelLease{} // ended by its holder: nothing is revoked
	md.requeue(l.offset, modelAttempt{attempts: l.attempts, retries: l.retries + 1, acquiredAt: l.acquiredAt}, now)
	if delay > 0 {
		md.retryAt = now.Add(delay)
	}
	return worklease.RetryResult{RetryCount: l.retries + 1}, nil
}

// pullActions returns the model test's actions for the pull calls.
func (s *modelTest) pullActions(leased, anyDomain *rapid.Generator[string], offset *rapid.Generator[int64]) map[string]func(*rapid.T) {
	payloads := []string{""} // "" is none
	if s.suite.Payloads {
		payloads = append(payloads, "p", "q", "empty")
	}
	payload := rapid.SampledFrom(payloads)
	drawPayload := func(t *rapid.T) []byte {
		switch name := payload.Draw(t, "payload"); name {
		case "":
			return nil
		case "empty":
			return []byte{}
		default:
			return []byte(name)
		}
	}
	delay := rapid.SampledFrom([]time.Duration{0, 0, time.Second, 5 * time.Second, -time.Second})
	causes := rapid.SampledFrom([]error{nil, errors.New("attempt failed")})
	actions := map[string]func(*rapid.T){
		"Enqueue": func(t *rapid.T) {
			s.enqueue(t, leased.Draw(t, "domain"), offset.Draw(t, "offset"), drawPayload(t), time.Time{})
		},
		"Claim": func(t *rapid.T) {
			s.claim(t, rapid.IntRange(1, 4).Draw(t, "n"))
		},
		"Retry": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			s.retry(t, d, s.drawToken(t, d), causes.Draw(t, "cause"), delay.Draw(t, "delay"))
		},
		// RetryCurrent retries the lease in flight, so that offsets come
		// back after their delays and reach the dead letters.
		"RetryCurrent": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			s.retry(t, d, s.model.domains[d].lease.token, nil, delay.Draw(t, "delay"))
		},
		// RetryMany may name a domain more than once: its failures are
		// answered in order.
		"RetryMany": func(t *rapid.T) {
			n := rapid.IntRange(0, 3).Draw(t, "n")
			failures := make([]worklease.Failure, n)
			for i := range failures {
				d := anyDomain.Draw(t, "domain")
				tok := s.drawToken(t, d)
				if md := s.model.domains[d]; md.leased && rapid.Bool().Draw(t, "current") {
					tok = md.lease.token
				}
				failures[i] = worklease.Failure{Claim: worklease.Claim{Domain: d, Token: tok}, Cause: causes.Draw(t, "cause"), Delay: delay.Draw(t, "delay")}
			}
			s.retryMany(t, failures)
		},
		// SucceedMany names each domain once, as the claims of one Claim
		// do: the contract leaves open in which order the claims of a
		// domain named twice are answered.
		"SucceedMany": func(t *rapid.T) {
			s.succeedMany(t, s.drawClaims(t, false))
		},
		"ClaimNext": func(t *rapid.T) {
			s.claimNext(t, s.drawClaims(t, false))
		},
		// ClaimNextRepeated repeats a ClaimNext that granted the lease in
		// flight, as a caller that lost its answer does (with a zero token
		// where none did: a refusal).
		"ClaimNextRepeated": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			s.claimNext(t, []worklease.Claim{{Domain: d, Token: s.model.domains[d].chainedFrom}})
		},
		// ClaimNextCurrent ends leases in flight, so that domains go
		// through their backlogs, and reach MaxStreak.
		"ClaimNextCurrent": func(t *rapid.T) {
			s.claimNext(t, s.drawClaims(t, true))
		},
		// The producers' calls: EnqueueAt schedules an offset, in the past
		// or up to a TTL ahead; Append with a key or not, now and then
		// scheduled; Cancel of any offset the domain knows.
		"EnqueueAt": func(t *rapid.T) {
			at := s.clk.Now().Add(schedule.Draw(t, "notBefore"))
			s.enqueue(t, leased.Draw(t, "domain"), offset.Draw(t, "offset"), drawPayload(t), at)
		},
		"Append": func(t *rapid.T) {
			var at time.Time
			// A schedule needs the feature too (see Suite.Lacks).
			if rapid.IntRange(0, 3).Draw(t, "scheduled") == 0 && !s.suite.lacks(FeatureEnqueueAt) {
				at = s.clk.Now().Add(schedule.Draw(t, "notBefore"))
			}
			s.append(t, leased.Draw(t, "domain"), drawPayload(t), keys.Draw(t, "key"), at)
		},
		"Cancel": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			off := s.drawKnownOffset(t, d)
			if rapid.IntRange(0, 7).Draw(t, "negative") == 0 {
				off = -1
			}
			s.cancel(t, d, off, rapid.Bool().Draw(t, "inFlight"))
		},
	}
	for name, f := range map[string]Feature{"EnqueueAt": FeatureEnqueueAt, "Append": FeatureAppend, "Cancel": FeatureCancel} {
		if s.suite.lacks(f) {
			delete(actions, name) // see Suite.Lacks
		}
	}
	return actions
}

// schedule draws how far ahead of now EnqueueAt and Append schedule an
// offset: now, before now (no schedule), or later.
var schedule = rapid.SampledFrom([]time.Duration{0, -time.Second, time.Second, 3 * time.Second, modelTTL})

// keys draws Append's idempotency key: none, or one of a few, so that
// they repeat.
var keys = rapid.SampledFrom([]string{"", "k1", "k2", "k3"})

// drawClaims draws up to three claims, each of another domain, with the
// lease in flight's token if current, and otherwise with drawToken's.
func (s *modelTest) drawClaims(t *rapid.T, current bool) []worklease.Claim {
	n := rapid.IntRange(0, 3).Draw(t, "n")
	domains := rapid.Permutation(modelAllDomains).Draw(t, "domains")[:n]
	claims := make([]worklease.Claim, 0, n)
	for _, d := range domains {
		if !current {
			claims = append(claims, worklease.Claim{Domain: d, Token: s.drawToken(t, d)})
		} else if md := s.model.domains[d]; md.leased {
			claims = append(claims, worklease.Claim{Domain: d, Offset: md.lease.offset, Token: md.lease.token})
		}
	}
	return claims
}

// enqueue is Enqueue, or EnqueueAt if at is not zero.
func (s *modelTest) enqueue(t *rapid.T, d string, off int64, payload []byte, at time.Time) {
	md, now := s.model.domains[d], s.clk.Now()
	s.model.pulling = true
	if s.suite.lacks(FeatureDuplicates) && md.holds(off) {
		return // the answer needs the feature: see Suite.Lacks
	}
	due := md.due(now)
	want, wantErr := md.enqueue(off, payload, at, now)
	before := s.before(t, d, due, true, wantErr)
	var got worklease.AcquireStatus
	var err error
	if at.IsZero() {
		got, err = s.b.Enqueue(s.ctx, d, off, payload)
	} else {
		got, err = s.b.EnqueueAt(s.ctx, d, off, payload, at)
	}
	if wantErr != nil {
		mustSentinel(t, wantErr, err, "Enqueue(%q, %d, %q)", d, off, payload)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "Enqueue(%q, %d)", d, off)
	mustEqual(t, want, got, "Enqueue(%q, %d)", d, off)
}

func (s *modelTest) append(t *rapid.T, d string, payload []byte, key string, at time.Time) {
	md, now := s.model.domains[d], s.clk.Now()
	s.model.pulling = true
	due := md.due(now)
	want, wantErr := md.appendNext(payload, key, at, now)
	before := s.before(t, d, due, true, wantErr)
	got, err := s.b.Append(s.ctx, d, payload, worklease.AppendOptions{Key: key, NotBefore: at})
	if wantErr != nil {
		mustSentinel(t, wantErr, err, "Append(%q, %q, %q)", d, payload, key)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "Append(%q, %q, %q)", d, payload, key)
	mustEqual(t, want, got, "Append(%q, %q, %q)", d, payload, key)
}

func (s *modelTest) cancel(t *rapid.T, d string, off int64, inFlight bool) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	wantNext, wantOK, wantErr := md.cancel(off, inFlight, now)
	before := s.before(t, d, due, off >= 0 && md.created, wantErr) // refused before the domain is touched
	h, err := s.b.Cancel(s.ctx, d, off, inFlight)
	s.requireAdmin(t, fmt.Sprintf("Cancel(%d, %t)", off, inFlight), d, before, wantNext, wantOK, wantErr, h.Next, h.HasNext, err)
}

func (s *modelTest) retry(t *rapid.T, d string, tok worklease.Token, cause error, delay time.Duration) {
	md, now := s.model.domains[d], s.clk.Now()
	due := md.due(now)
	if delay >= 0 {
		s.model.pulling = true
	}
	want, wantErr := md.retry(tok, cause, delay, now)
	before := s.before(t, d, due, delay >= 0, wantErr) // a negative delay is refused before the domain is touched
	got, err := s.b.Retry(s.ctx, d, tok, cause, delay)
	if wantErr != nil {
		mustSentinel(t, wantErr, err, "Retry(%q, %v, %v)", d, tok, delay)
		mustZero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	mustNoError(t, err, "Retry(%q, %v, %v)", d, tok, delay)
	mustEqual(t, want, got, "Retry(%q, %v, %v)", d, tok, delay)
}

// retryMany is RetryMany on the model: each failure is answered as Retry
// would answer it, in order.
func (s *modelTest) retryMany(t *rapid.T, failures []worklease.Failure) {
	now := s.clk.Now()
	want := make([]worklease.RetryResult, len(failures))
	wantErrs := make([]error, len(failures))
	for i, f := range failures {
		if f.Delay >= 0 {
			s.model.pulling = true
		}
		want[i], wantErrs[i] = s.model.domains[f.Domain].retry(f.Token, f.Cause, f.Delay, now)
	}
	got, errs, err := s.b.RetryMany(s.ctx, failures)
	mustNoError(t, err, "RetryMany")
	mustEqual(t, len(failures), len(got), "RetryMany: results")
	mustEqual(t, len(failures), len(errs), "RetryMany: errors")
	for i, f := range failures {
		if wantErrs[i] != nil {
			mustSentinel(t, wantErrs[i], errs[i], "RetryMany: failure %d of %q", i, f.Domain)
			mustZero(t, got[i])
			continue
		}
		mustNoError(t, errs[i], "RetryMany: failure %d of %q", i, f.Domain)
		mustEqual(t, want[i], got[i], "RetryMany: failure %d of %q", i, f.Domain)
	}
}

func (s *modelTest) succeedMany(t *rapid.T, claims []worklease.Claim) {
	now := s.clk.Now()
	want := make([]error, len(claims))
	for i, c := range claims {
		md := s.model.domains[c.Domain]
		if _, want[i] = md.succeed(c.Token, now); want[i] == nil {
			md.streak, md.streakUnsure = 0, false
		}
	}
	got, err := s.b.SucceedMany(s.ctx, claims)
	mustNoError(t, err, "SucceedMany")
	mustEqual(t, len(claims), len(got), "SucceedMany: errors")
	for i, w := range want {
		if w == nil {
			mustNoError(t, got[i], "SucceedMany: claim %d of %q", i, claims[i].Domain)
		} else {
			mustSentinel(t, w, got[i], "SucceedMany: claim %d of %q", i, claims[i].Domain)
		}
	}
}

// claimNext is ClaimNext on the model: it checks the errors and the next
// leases, and makes them in the model.
func (s *modelTest) claimNext(t *rapid.T, claims []worklease.Claim) {
	now := s.clk.Now()
	s.model.pulling = true
	type answer struct {
		err            error
		may, must      bool
		repeat, unsure bool // see modelDomain.repeats
	}
	want := make([]answer, len(claims))
	for i, c := range claims {
		md := s.model.domains[c.Domain]
		if want[i].repeat, want[i].unsure = md.repeats(c.Token, now); !want[i].repeat && !want[i].unsure {
			want[i].may, want[i].must, want[i].err = md.claimNext(c.Token, now)
		}
	}
	got, errs, err := s.b.ClaimNext(s.ctx, claims)
	mustNoError(t, err, "ClaimNext")
	mustEqual(t, len(claims), len(errs), "ClaimNext: errors")
	next := 0 // got's next lease to match
	for i, c := range claims {
		w, md := want[i], s.model.domains[c.Domain]
		if w.unsure { // the backend chooses: a repeat, or Succeed's error
			if w.repeat = errs[i] == nil; !w.repeat {
				_, w.err = md.succeed(c.Token, now)
				check(t, w.err != nil, "ClaimNext: claim %d of %q: Succeed of a spent token went through", i, c.Domain)
			}
		}
		if w.repeat {
			mustNoError(t, errs[i], "ClaimNext: repeated claim %d of %q", i, c.Domain)
			check(t, next < len(got) && got[next].Domain == c.Domain, "ClaimNext: repeated claim %d of %q led to no lease", i, c.Domain)
			g := got[next]
			next++
			want := worklease.Claim{Domain: c.Domain, Offset: md.lease.offset, Token: md.lease.token, Attempt: md.lease.attempts, ExpiresAt: md.lease.expiresAt}
			if payload, ok := md.payloads[md.lease.offset]; ok {
				want.Payload = []byte(payload)
			}
			mustEqual(t, want, g, "ClaimNext: the lease of %q, repeated", c.Domain)
			continue
		}
		if w.err != nil {
			mustSentinel(t, w.err, errs[i], "ClaimNext: claim %d of %q", i, c.Domain)
			continue
		}
		mustNoError(t, errs[i], "ClaimNext: claim %d of %q", i, c.Domain)
		granted := next < len(got) && got[next].Domain == c.Domain
		check(t, !granted || w.may, "ClaimNext: claim %d of %q led to a next lease, which it may not (streak %d)", i, c.Domain, md.streak)
		check(t, granted || !w.must, "ClaimNext: claim %d of %q led to no next lease, which it must (streak %d)", i, c.Domain, md.streak)
		if !granted {
			md.streak, md.streakUnsure = 0, false
			continue
		}
		g := got[next]
		next++
		head := md.backlog[0]
		payload, hasPayload := md.payloads[head]
		md.acquireHead(c.Domain, head, now)
		s.requireGrant(t, c.Domain, g.Token, now)
		md.streak++
		md.chainedFrom = c.Token
		want := worklease.Claim{Domain: c.Domain, Offset: head, Token: g.Token, Attempt: md.lease.attempts, ExpiresAt: md.lease.expiresAt}
		if hasPayload {
			want.Payload = []byte(payload)
		}
		mustEqual(t, want, g, "ClaimNext: the next lease of %q", c.Domain)
		check(t, hasPayload == (g.Payload != nil), "ClaimNext: %q/%d's payload %q, want one: %t", c.Domain, g.Offset, g.Payload, hasPayload)
	}
	mustEqual(t, len(got), next, "ClaimNext: next leases %v, in the order of %v", claimNames(got), claimNames(claims))
}

// claim is Claim on the model: it checks the takeovers and the claims the
// backend made, and makes them in the model.
func (s *modelTest) claim(t *rapid.T, n int) {
	now := s.clk.Now()
	s.model.pulling = true
	var due []string // the domains whose lease is due, the earliest first
	for _, d := range modelAllDomains {
		if s.model.domains[d].due(now) {
			due = append(due, d)
		}
	}
	slices.SortStableFunc(due, func(a, b string) int {
		return s.model.domains[a].lease.expiresAt.Compare(s.model.domains[b].lease.expiresAt)
	})
	got, err := s.b.Claim(s.ctx, n)
	mustNoError(t, err, "Claim(%d)", n)
	check(t, len(got) <= n, "Claim(%d): %d claims", n, len(got))

	// Up to n due leases were taken over, the earliest first: their
	// tokens are no longer leased.
	leases, err := s.b.Leases(s.ctx)
	mustNoError(t, err, "Leases")
	var takenOver []string
	for _, d := range due {
		tok := s.model.domains[d].lease.token
		if !slices.ContainsFunc(leases, func(l worklease.LeaseInfo) bool { return l.Domain == d && l.Token == tok }) {
			takenOver = append(takenOver, d)
		}
	}
	mustEqual(t, min(n, len(due)), len(takenOver), "Claim(%d): leases taken over of %q", n, due)
	for _, d := range due {
		if !slices.Contains(takenOver, d) {
			for _, o := range takenOver {
				check(t, !s.model.domains[d].lease.expiresAt.Before(s.model.domains[o].lease.expiresAt),
					"Claim(%d) took over %q's lease before %q's, which expired first", n, o, d)
			}
		}
	}
	for _, d := range takenOver {
		s.model.domains[d].touch(now)
	}
	s.model.syncReady(now)

	// The claims: heads of domains that may be claimed, in an order the
	// contract allows, and every domain that must be claimed if there
	// were fewer than n.
	var claimed []string
	for i, c := range got {
		md := s.model.domains[c.Domain]
		check(t, !slices.Contains(claimed, c.Domain), "Claim(%d): %q claimed twice", n, c.Domain)
		_, may := md.ready.claimable(now)
		check(t, may, "Claim(%d): claimed %q, which is not ready (%+v)", n, c.Domain, md.ready)
		for _, prev := range claimed {
			p := s.model.domains[prev]
			check(t, !md.ready.ranksBefore(&p.ready), "Claim(%d): claim %d, %q, became ready before %q, claimed before it", n, i, c.Domain, prev)
		}
		claimed = append(claimed, c.Domain)
	}
	for _, d := range modelAllDomains {
		md := s.model.domains[d]
		if must, _ := md.ready.claimable(now); !must || slices.Contains(claimed, d) {
			continue
		}
		check(t, len(got) == n, "Claim(%d): %q was ready but not claimed, and only %v were", n, d, claimed)
		for _, c := range claimed {
			check(t, !md.ready.ranksBefore(&s.model.domains[c].ready), "Claim(%d): %q was ready before %q, which was claimed instead", n, d, c)
		}
	}
	for _, c := range got {
		md := s.model.domains[c.Domain]
		head := md.backlog[0]
		payload, hasPayload := md.payloads[head]
		mustEqual(t, head, c.Offset, "Claim(%d): %q's offset", n, c.Domain)
		// A claim starts a streak again; one that took over due leases
		// first may not, in the PostgreSQL backend (see claimNext).
		md.streakUnsure = len(due) > 0 && (md.streakUnsure || md.streak > 0)
		md.streak = 0
		md.acquireHead(c.Domain, head, now)
		s.requireGrant(t, c.Domain, c.Token, now)
		want := worklease.Claim{Domain: c.Domain, Offset: head, Token: c.Token, Attempt: md.lease.attempts, ExpiresAt: md.lease.expiresAt}
		if hasPayload {
			want.Payload = []byte(payload)
		}
		mustEqual(t, want, c, "Claim(%d)", n)
		check(t, hasPayload == (c.Payload != nil), "Claim(%d): %q/%d's payload %q, want one: %t", n, c.Domain, c.Offset, c.Payload, hasPayload)
	}
}

// checkPull checks the invariants of the pull calls on d in the model:
// a domain is listed exactly when it is ready, and payloads belong to
// offsets queued, in flight or failed.
func (l *leaseModel) checkPull(t *rapid.T, d string) {
	md := l.domains[d]
	check(t, md.ready.listed == md.isReady(), "%q: listed %v, ready %v", d, md.ready.listed, md.isReady())
	for off := range md.payloads {
		check(t, slices.Contains(md.backlog, off) || md.leased && md.lease.offset == off || modelHas(md.failed, off),
			"%q: payload kept for %d, neither queued, in flight nor failed", d, off)
	}
	for off := range md.scheduled {
		check(t, slices.Contains(md.backlog, off), "%q: %d scheduled, and not queued", d, off)
	}
	check(t, md.retryAt.IsZero() || !md.leased && len(md.backlog) > 0, "%q: a retry's delay on a domain leased or without a backlog", d)
	check(t, md.created || len(md.payloads) == 0, "%q: payloads of a domain the backend does not know", d)
}
