package worklease_test

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

// The model test drives a real Manager and a plain model of the seed 000
// contract side by side, and after every step checks that they agree and
// that both satisfy the contract's six invariants.
//
// TryAcquire draws its domain from modelLeasedDomains only, so "z" never gets a
// record: Succeed, Fail, Inspect and negative offsets on it exercise the
// paths for a domain the Manager has never seen. Offsets come from a small
// range so that they collide.
var (
	modelLeasedDomains = []string{"a", "b", "c"}
	modelAllDomains    = []string{"a", "b", "c", "z"}
)

const maxModelOffset = 6

func TestManagerModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, managerModel)
}

func FuzzManagerModel(f *testing.F) {
	// rapid reads the input as a stream of 64-bit words. All zeros is the
	// smallest run; the random seeds give the fuzzer longer runs to mutate.
	// A seed that runs out of words mid-run is skipped, not failed.
	f.Add(make([]byte, 64))
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		b := make([]byte, 4096)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(rapid.MakeFuzz(managerModel))
}

// managerModel is the property shared by TestManagerModel and
// FuzzManagerModel.
func managerModel(t *rapid.T) {
	maxRetries := rapid.IntRange(0, 3).Draw(t, "maxRetries")
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	m, err := worklease.New(worklease.WithMaxRetries(maxRetries), worklease.WithClock(clk))
	require.NoError(t, err)
	// other issues tokens that must never be valid in m, even when their
	// fence and domain serial coincide with a token of m.
	other, err := worklease.New(worklease.WithMaxRetries(maxRetries), worklease.WithClock(clk))
	require.NoError(t, err)

	s := &modelTest{m: m, other: other, clk: clk, model: newLeaseModel(maxRetries)}
	leased := rapid.SampledFrom(modelLeasedDomains)
	anyDomain := rapid.SampledFrom(modelAllDomains)
	offset := rapid.Int64Range(0, maxModelOffset)
	burstOffset := rapid.OneOf(rapid.Int64Range(0, 3*maxModelOffset), rapid.Int64Range(0, 3*maxModelOffset),
		rapid.Int64Range(0, 3*maxModelOffset), rapid.Int64Range(math.MaxInt64-2, math.MaxInt64))

	t.Repeat(map[string]func(*rapid.T){
		"TryAcquire": func(t *rapid.T) {
			s.tryAcquire(t, leased.Draw(t, "domain"), offset.Draw(t, "offset"))
		},
		// TryAcquireHead asks for the backlog's head when there is one, as an
		// orchestrator following a hint does; plain TryAcquire finds it
		// only by chance.
		"TryAcquireHead": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			off := offset.Draw(t, "offset")
			if b := s.model.domains[d].backlog; len(b) > 0 {
				off = b[0]
			}
			s.tryAcquire(t, d, off)
		},
		// Burst queues many offsets at once, so that backlogs grow past
		// the size where the Manager starts indexing them, and now and
		// then offsets at the top of the range, where an off-by-one
		// overflows.
		"Burst": func(t *rapid.T) {
			d := leased.Draw(t, "domain")
			n := rapid.IntRange(1, 12).Draw(t, "n")
			for range n {
				s.tryAcquire(t, d, burstOffset.Draw(t, "offset"))
			}
		},
		"TryAcquireNegative": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			off := rapid.OneOf(rapid.Just(int64(-1)), rapid.Just(int64(math.MinInt64)),
				rapid.Int64Range(math.MinInt64, -1)).Draw(t, "offset")
			before := s.snapshot(t, d)
			got, err := s.m.TryAcquire(d, off)
			require.ErrorIs(t, err, worklease.ErrInvalidOffset)
			require.NotErrorIs(t, err, worklease.ErrBacklogOrder)
			require.Zero(t, got)
			s.requireUnchanged(t, d, before)
		},
		"Succeed": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			s.succeed(t, d, s.drawToken(t, d))
		},
		"Fail": func(t *rapid.T) {
			d := anyDomain.Draw(t, "domain")
			tok := s.drawToken(t, d)
			cause := rapid.SampledFrom([]error{nil, errors.New("attempt failed")}).Draw(t, "cause")
			s.fail(t, d, tok, cause)
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
			s.clk.Advance(time.Duration(rapid.Int64Range(0, 90_000).Draw(t, "ms")) * time.Millisecond)
		},
		"Inspect": func(t *rapid.T) {
			s.checkDomain(t, anyDomain.Draw(t, "domain"))
		},
		"": s.check,
	})
}

// A modelLease is the seed's LeaseRecord.
type modelLease struct {
	offset     int64
	token      worklease.Token
	acquiredAt time.Time
	retries    int
}

// A modelDomain is one domain of the seed 000 contract, written as plainly as
// possible, plus the history that the invariants about the past need.
type modelDomain struct {
	leased    bool
	lease     modelLease // zero unless leased
	processed map[int64]bool
	failed    map[int64]bool
	backlog   []int64 // FIFO, head first

	created  bool              // TryAcquire has been called with a valid offset: the domain has a record
	record   any               // worklease.RecordOf once created; must never change
	grants   []worklease.Token // the token of every Acquired, in order
	granted  []int64           // the offset of every Acquired, in order
	enqueued []int64           // every offset that entered the backlog, in order
	dequeued []int64           // every offset that left it, in order
}

// A leaseModel is the whole Manager: plain maps and slices, no locks.
type leaseModel struct {
	maxRetries int
	domains    map[string]*modelDomain
	issued     map[worklease.Token]string // every token ever granted, to its domain
	grants     int                        // number of Acquired results, in all domains
}

func newLeaseModel(maxRetries int) *leaseModel {
	l := &leaseModel{maxRetries: maxRetries, domains: map[string]*modelDomain{}, issued: map[worklease.Token]string{}}
	for _, d := range modelAllDomains {
		l.domains[d] = &modelDomain{processed: map[int64]bool{}, failed: map[int64]bool{}}
	}
	return l
}

// acquire is TryAcquire on the model. On Acquired the model cannot know the
// new token: the result carries a zero Token, and the caller records the
// real one with grant. The model changes only when the error is nil.
func (md *modelDomain) acquire(domain string, off int64, now time.Time) (worklease.AcquireResult, error) {
	md.created = true
	switch {
	case md.processed[off]:
		return worklease.AcquireResult{Status: worklease.AlreadyProcessed}, nil
	case md.failed[off]:
		return worklease.AcquireResult{Status: worklease.AlreadyFailed}, nil
	case md.leased && off == md.lease.offset:
		l := md.lease
		return worklease.AcquireResult{Status: worklease.AlreadyAcquired, Token: l.token, AcquiredAt: l.acquiredAt, RetryCount: l.retries}, nil
	case md.leased:
		if !slices.Contains(md.backlog, off) {
			md.backlog = append(md.backlog, off)
			md.enqueued = append(md.enqueued, off)
		}
		return worklease.AcquireResult{Status: worklease.Enqueued}, nil
	}
	if len(md.backlog) > 0 {
		if head := md.backlog[0]; head != off {
			return worklease.AcquireResult{}, &worklease.BacklogOrderError{Domain: domain, Expected: head, Got: off}
		}
		md.backlog = md.backlog[1:]
		md.dequeued = append(md.dequeued, off)
	}
	md.leased = true
	md.lease = modelLease{offset: off, acquiredAt: now}
	return worklease.AcquireResult{Status: worklease.Acquired, AcquiredAt: now}, nil
}

// grant records tok as the token of the lease acquire just granted.
func (l *leaseModel) grant(domain string, tok worklease.Token) {
	md := l.domains[domain]
	md.lease.token = tok
	md.grants = append(md.grants, tok)
	md.granted = append(md.granted, md.lease.offset)
	l.issued[tok] = domain
	l.grants++
}

// checkToken is the token check of Succeed and Fail.
func (md *modelDomain) checkToken(tok worklease.Token) error {
	if !md.leased {
		return worklease.ErrNoLease
	}
	if tok != md.lease.token {
		return worklease.ErrTokenMismatch
	}
	return nil
}

// hint returns the backlog's head, if any.
func (md *modelDomain) hint() (int64, bool) {
	if len(md.backlog) == 0 {
		return 0, false
	}
	return md.backlog[0], true
}

func (md *modelDomain) succeed(tok worklease.Token) (worklease.SucceedResult, error) {
	if err := md.checkToken(tok); err != nil {
		return worklease.SucceedResult{}, err
	}
	md.processed[md.lease.offset] = true
	md.leased, md.lease = false, modelLease{}
	if next, ok := md.hint(); ok {
		return worklease.SucceedResult{Status: worklease.NextHint, Next: next}, nil
	}
	return worklease.SucceedResult{Status: worklease.NoBacklog}, nil
}

func (md *modelDomain) fail(tok worklease.Token, maxRetries int) (worklease.FailResult, error) {
	if err := md.checkToken(tok); err != nil {
		return worklease.FailResult{}, err
	}
	if md.lease.retries < maxRetries {
		md.lease.retries++
		return worklease.FailResult{Status: worklease.RetryScheduled, RetryCount: md.lease.retries}, nil
	}
	retries := md.lease.retries
	md.failed[md.lease.offset] = true
	md.leased, md.lease = false, modelLease{}
	if next, ok := md.hint(); ok {
		return worklease.FailResult{Status: worklease.GiveUpNextHint, RetryCount: retries, Next: next}, nil
	}
	return worklease.FailResult{Status: worklease.GiveUpNoBacklog, RetryCount: retries}, nil
}

// modelTest holds one run's Manager, model and clock.
type modelTest struct {
	m     *worklease.Manager
	other *worklease.Manager // a second Manager, whose tokens m must reject
	clk   *clock.Fake
	model *leaseModel

	otherOffset int64 // next offset to acquire in other
}

func (s *modelTest) tryAcquire(t *rapid.T, d string, off int64) {
	md := s.model.domains[d]
	before := s.snapshot(t, d)
	now := s.clk.Now()
	got, err := s.m.TryAcquire(d, off)
	want, wantErr := md.acquire(d, off, now)

	if wantErr != nil {
		var wantOrder, gotOrder *worklease.BacklogOrderError
		require.ErrorAs(t, wantErr, &wantOrder)
		require.ErrorIs(t, err, worklease.ErrBacklogOrder)
		require.ErrorAs(t, err, &gotOrder)
		require.Equal(t, *wantOrder, *gotOrder)
		require.Zero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	require.NoError(t, err, "TryAcquire(%q, %d)", d, off)
	require.Equal(t, want.Status, got.Status, "TryAcquire(%q, %d)", d, off)
	require.True(t, want.AcquiredAt.Equal(got.AcquiredAt), "TryAcquire(%q, %d): AcquiredAt %v, want %v", d, off, got.AcquiredAt, want.AcquiredAt)
	require.Equal(t, want.RetryCount, got.RetryCount, "TryAcquire(%q, %d): RetryCount", d, off)
	if want.Status != worklease.Acquired {
		require.Equal(t, want.Token, got.Token, "TryAcquire(%q, %d): Token", d, off)
		return
	}
	// A grant: the token must be new everywhere and fence this domain's
	// grants in order. Token documents the fence as the number of grants in
	// the domain so far, this one included.
	require.False(t, got.Token.IsZero(), "Acquired with the zero token")
	if prev, dup := s.model.issued[got.Token]; dup {
		require.Failf(t, "token issued twice", "token %v granted in %q was already granted in %q", got.Token, d, prev)
	}
	require.Equal(t, uint64(len(md.grants)+1), got.Token.Fence(), "fence of grant %d in %q", len(md.grants)+1, d)
	s.model.grant(d, got.Token)
}

func (s *modelTest) succeed(t *rapid.T, d string, tok worklease.Token) {
	before := s.snapshot(t, d)
	got, err := s.m.Succeed(d, tok)
	want, wantErr := s.model.domains[d].succeed(tok)
	if wantErr != nil {
		modelRequireSentinel(t, wantErr, err)
		require.Zero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	require.NoError(t, err, "Succeed(%q, %v)", d, tok)
	require.Equal(t, want, got, "Succeed(%q, %v)", d, tok)
}

func (s *modelTest) fail(t *rapid.T, d string, tok worklease.Token, cause error) {
	before := s.snapshot(t, d)
	got, err := s.m.Fail(d, tok, cause)
	want, wantErr := s.model.domains[d].fail(tok, s.model.maxRetries)
	if wantErr != nil {
		modelRequireSentinel(t, wantErr, err)
		require.Zero(t, got)
		s.requireUnchanged(t, d, before)
		return
	}
	require.NoError(t, err, "Fail(%q, %v)", d, tok)
	require.Equal(t, want, got, "Fail(%q, %v)", d, tok)
}

// modelRequireSentinel checks that err is want (ErrNoLease or ErrTokenMismatch)
// under errors.Is, and not the other one.
func modelRequireSentinel(t *rapid.T, want, err error) {
	require.ErrorIs(t, err, want)
	for _, other := range []error{worklease.ErrNoLease, worklease.ErrTokenMismatch, worklease.ErrBacklogOrder} {
		if other != want {
			require.NotErrorIs(t, err, other)
		}
	}
}

// drawToken picks the token for a Succeed or Fail on d: the current lease's,
// a stale one from d, one from another domain, one from another Manager, the
// zero Token, or one made up with NewToken.
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
	kinds := []string{"zero", "fabricated", "otherManager"}
	if md.leased {
		kinds = append(kinds, "current", "current")
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
	case "stale":
		return rapid.SampledFrom(stale).Draw(t, "staleToken")
	case "foreign":
		return rapid.SampledFrom(foreign).Draw(t, "foreignToken")
	case "otherManager":
		// A token that is, or once was, valid in the other Manager; it
		// may share its fence and domain serial with a token of m.
		off := s.otherOffset
		s.otherOffset++
		res, err := s.other.TryAcquire(d, off)
		require.NoError(t, err)
		require.Equal(t, worklease.Acquired, res.Status)
		_, err = s.other.Succeed(d, res.Token)
		require.NoError(t, err)
		return res.Token
	case "fabricated":
		// Parts near the real ones, so that a forgery may differ from the
		// current token in a single part, or even equal it: a Token is a
		// plain value, and one equal to the lease's token is that token.
		instances := []uint64{0, 1, math.MaxUint64}
		if toks := s.model.issuedInOrder(); len(toks) > 0 {
			inst := modelTokenPart(t, toks[0], 2)
			instances = append(instances, inst, inst^1)
		}
		fence := rapid.Uint64Range(0, 8).Draw(t, "fence")
		serial := rapid.Uint64Range(0, 5).Draw(t, "serial")
		instance := rapid.SampledFrom(instances).Draw(t, "instance")
		return worklease.NewToken(fence, serial, instance)
	default:
		panic("unknown token kind " + kind)
	}
}

// issuedInOrder returns every token granted, domain by domain in grant order.
func (l *leaseModel) issuedInOrder() []worklease.Token {
	var toks []worklease.Token
	for _, d := range modelAllDomains {
		toks = append(toks, l.domains[d].grants...)
	}
	return toks
}

// modelTokenPart returns part i of tok's text form "fence-domain-instance": the
// fence in decimal, the domain serial and the instance in hex.
func modelTokenPart(t require.TestingT, tok worklease.Token, i int) uint64 {
	parts := strings.Split(tok.String(), "-")
	require.Len(t, parts, 3, "token text %q", tok.String())
	base := 16
	if i == 0 {
		base = 10
	}
	v, err := strconv.ParseUint(parts[i], base, 64)
	require.NoError(t, err)
	return v
}

// A modelSnapshot is everything observable about one domain.
type modelSnapshot struct {
	info              worklease.DomainInfo
	processed, failed []int64
	record            any
}

func (s *modelTest) snapshot(t *rapid.T, d string) modelSnapshot {
	info, err := s.m.Inspect(d)
	require.NoError(t, err)
	p, f := worklease.Terminal(s.m, d)
	return modelSnapshot{info: info, processed: p, failed: f, record: worklease.RecordOf(s.m, d)}
}

// requireUnchanged checks that a call that returned an error changed nothing
// in d, not even whether d has a record.
func (s *modelTest) requireUnchanged(t *rapid.T, d string, before modelSnapshot) {
	after := s.snapshot(t, d)
	require.True(t, before.record == after.record, "failed call changed the record of %q", d)
	before.record, after.record = nil, nil
	require.Equal(t, before, after, "failed call changed %q", d)
}

// check is the "" action: it runs after every step.
func (s *modelTest) check(t *rapid.T) {
	require.NoError(t, worklease.CheckInvariants(s.m))
	for _, d := range modelAllDomains {
		s.checkDomain(t, d)
	}
	// 5. Token fencing, across domains: every grant got a token never
	// issued before, in any domain.
	require.Len(t, s.model.issued, s.model.grants, "a token was issued twice")
}

// checkDomain compares d in the Manager with d in the model, and checks the
// seed's invariants on the model's side.
func (s *modelTest) checkDomain(t *rapid.T, d string) {
	md := s.model.domains[d]
	info, err := s.m.Inspect(d)
	require.NoError(t, err)

	require.Equal(t, md.leased, info.Leased, "%q: Leased", d)
	if md.leased {
		l := info.Lease
		require.Equal(t, md.lease.offset, l.Offset, "%q: lease offset", d)
		require.Equal(t, md.lease.token, l.Token, "%q: lease token", d)
		require.Equal(t, md.lease.retries, l.RetryCount, "%q: lease retry count", d)
		// AcquiredAt is the time of the grant, whatever the clock did and
		// however many retries followed.
		require.True(t, md.lease.acquiredAt.Equal(l.AcquiredAt), "%q: AcquiredAt %v, want %v", d, l.AcquiredAt, md.lease.acquiredAt)
	} else {
		require.Zero(t, info.Lease, "%q: idle domain reports a lease", d)
	}
	modelRequireOffsets(t, md.backlog, info.Backlog, "%q: backlog", d)
	require.Equal(t, int64(len(md.processed)), info.Processed, "%q: Processed", d)
	require.Equal(t, int64(len(md.failed)), info.Failed, "%q: Failed", d)

	processed, failed := worklease.Terminal(s.m, d)
	modelRequireOffsets(t, slices.Sorted(maps.Keys(md.processed)), processed, "%q: processed", d)
	modelRequireOffsets(t, slices.Sorted(maps.Keys(md.failed)), failed, "%q: failed", d)

	// 6. Stable monitor: a domain gets its record on its first TryAcquire,
	// and keeps it.
	rec := worklease.RecordOf(s.m, d)
	switch {
	case !md.created:
		require.Nil(t, rec, "%q has a record before any TryAcquire", d)
	case md.record == nil:
		require.NotNil(t, rec, "%q has no record after TryAcquire", d)
		md.record = rec
	default:
		require.True(t, rec == md.record, "%q: record replaced", d)
	}

	s.model.checkInvariants(t, d)
}

// checkInvariants checks seed 000's invariants on d in the model. The model
// is simple enough to be right by inspection; these checks make sure that it
// is, so that agreeing with it means obeying the contract.
func (l *leaseModel) checkInvariants(t *rapid.T, d string) {
	md := l.domains[d]

	// 1. Single in-flight unit: at most one lease, on the latest grant,
	// and every earlier grant is terminal.
	settled := md.granted
	if md.leased {
		require.NotEmpty(t, md.grants, "%q: lease without a grant", d)
		require.Equal(t, md.grants[len(md.grants)-1], md.lease.token, "%q: lease is not the latest grant", d)
		require.Equal(t, md.granted[len(md.granted)-1], md.lease.offset, "%q: lease is not the latest grant", d)
		require.GreaterOrEqual(t, md.lease.retries, 0)
		require.LessOrEqual(t, md.lease.retries, l.maxRetries, "%q: more retries than allowed", d)
		settled = settled[:len(settled)-1]
	} else {
		require.Zero(t, md.lease, "%q: idle domain keeps a lease", d)
	}
	for _, off := range settled {
		require.True(t, md.processed[off] || md.failed[off], "%q: granted offset %d neither in flight nor terminal", d, off)
	}

	// 2. Disjointness.
	inBacklog := map[int64]bool{}
	for _, off := range md.backlog {
		require.False(t, inBacklog[off], "%q: %d queued twice", d, off)
		inBacklog[off] = true
		require.False(t, md.processed[off] || md.failed[off], "%q: terminal offset %d queued", d, off)
	}
	if md.leased {
		off := md.lease.offset
		require.False(t, md.processed[off] || md.failed[off] || inBacklog[off], "%q: current offset %d is terminal or queued", d, off)
	}
	for off := range md.processed {
		require.False(t, md.failed[off], "%q: %d both processed and failed", d, off)
	}

	// 3. FIFO: offsets leave the backlog only from the head, so those that
	// left are a prefix of those that entered, and the backlog is the rest.
	require.Equal(t, len(md.enqueued), len(md.dequeued)+len(md.backlog), "%q: backlog lost or gained offsets", d)
	modelRequireOffsets(t, md.enqueued[:len(md.dequeued)], md.dequeued, "%q: dequeue order", d)
	modelRequireOffsets(t, md.enqueued[len(md.dequeued):], md.backlog, "%q: backlog order", d)

	// 4. Idempotence: no offset is granted twice, and every terminal
	// offset was granted (so it came back neither to the backlog, checked
	// above, nor to a lease).
	granted := map[int64]bool{}
	for _, off := range md.granted {
		require.False(t, granted[off], "%q: offset %d granted twice", d, off)
		granted[off] = true
	}
	for off := range md.processed {
		require.True(t, granted[off], "%q: processed %d was never granted", d, off)
	}
	for off := range md.failed {
		require.True(t, granted[off], "%q: failed %d was never granted", d, off)
	}
	require.Equal(t, len(md.granted), len(md.processed)+len(md.failed)+modelBtoi(md.leased), "%q: grants do not add up", d)

	// 5. Token fencing: fences of grants strictly increase.
	for i, tok := range md.grants {
		require.False(t, tok.IsZero())
		if i > 0 {
			require.Greater(t, tok.Fence(), md.grants[i-1].Fence(), "%q: fence did not increase", d)
		}
		require.Equal(t, d, l.issued[tok], "%q: token %v attributed to another domain", d, tok)
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
func modelRequireOffsets(t require.TestingT, want, got []int64, msgAndArgs ...any) {
	if !slices.Equal(want, got) {
		msg := ""
		if len(msgAndArgs) > 0 {
			msg = fmt.Sprintf(msgAndArgs[0].(string), msgAndArgs[1:]...) + ": "
		}
		require.Failf(t, "offsets differ", "%sgot %v, want %v", msg, got, want)
	}
}
