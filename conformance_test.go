package worklease_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/memjournal"
	"github.com/worklease/worklease/leasetest"
	"github.com/worklease/worklease/wal"
)

// The Manager runs the conformance suite three ways: in memory, on an
// in-memory journal, and on a wal journal on disk. Reopen restarts the
// Manager on its journal, which must give back the state it had; Check
// runs the Manager's own invariant checks after every step of the model.

func TestConformance(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, managerSuite(managerSetup{}))
}

func TestConformanceMemJournal(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, managerSuite(managerSetup{journal: journalMem}))
}

func TestConformanceWAL(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, managerSuite(managerSetup{journal: journalWAL}))
}

// FuzzManagerModel runs the suite's model test as a fuzz target, on a
// Manager without a journal.
func FuzzManagerModel(f *testing.F) {
	leasetest.Fuzz(f, managerSuite(managerSetup{}))
}

type journalKind uint8

const (
	journalNone journalKind = iota // four shards
	journalMem                     // memjournal, snapshotting every 64 records, one shard
	journalWAL                     // wal in a temporary directory, without fsyncs; four shards
)

type managerSetup struct{ journal journalKind }

// managerSuite describes the Manager, journaled as setup says, to the
// suite.
func managerSuite(setup managerSetup) leasetest.Suite {
	s := leasetest.Suite{
		New: func(t *testing.T, opts ...worklease.Option) worklease.Backend {
			return openChecked(t, setup, nil, opts)
		},
		Events:   true,
		Payloads: true,
		Check:    func(b worklease.Backend) error { return b.(*checkedBackend).check() },
	}
	if setup.journal != journalNone {
		s.Reopen = func(t *testing.T, b worklease.Backend, opts ...worklease.Option) worklease.Backend {
			cb := b.(*checkedBackend)
			if err := cb.m.Close(); err != nil && !errors.Is(err, worklease.ErrClosed) {
				t.Fatalf("Close before a restart: %v", err)
			}
			return openChecked(t, setup, cb, opts)
		}
	}
	return s
}

// openChecked makes a Manager on a new journal, or, if prev is not nil, on
// prev's journal, which prev's Manager has closed.
func openChecked(t *testing.T, setup managerSetup, prev *checkedBackend, opts []worklease.Option) *checkedBackend {
	t.Helper()
	cfg, err := worklease.NewConfig(opts...)
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	cb := &checkedBackend{clk: cfg.Clock, monotonic: cfg.MonotonicOffsets, tracks: newGrantTracks(), records: map[string]any{}}
	if prev != nil {
		cb.tracks = prev.tracks
		cb.mem, cb.dir, cb.restarts = prev.mem, prev.dir, prev.restarts+1
	}
	if cfg.Observer != nil {
		// Stats must count what the observer sees.
		cb.counts = &eventCounts{inner: cfg.Observer}
		opts = append(slices.Clip(opts), worklease.WithObserver(cb.counts))
	}
	// Few shards, as a small Manager has: every look (Domains, Leases,
	// Stats, the invariant check) visits every shard after every step.
	opts = append(slices.Clip(opts), worklease.WithShards(4))
	switch setup.journal {
	case journalMem:
		if cb.mem == nil {
			cb.mem = &memjournal.Journal{SnapshotEvery: 64}
		} else {
			cb.mem.Reopen()
		}
		opts = append(slices.Clip(opts), worklease.WithJournal(cb.mem), worklease.WithShards(1))
	case journalWAL:
		if cb.dir == "" {
			cb.dir = t.TempDir()
		}
		log, err := wal.Open(cb.dir, wal.WithSyncMode(wal.SyncNone))
		if err != nil {
			t.Fatalf("wal.Open: %v", err)
		}
		opts = append(slices.Clip(opts), worklease.WithJournal(log))
	}
	cb.m, err = worklease.New(opts...)
	if err != nil {
		t.Fatalf("New (restart %d): %v", cb.restarts, err)
	}
	cb.Backend = cb.m.Backend()
	return cb
}

// A checkedBackend is a Manager's Backend that also checks, as calls go
// by, what only the Manager promises: fences count the grants of their
// domain, and a domain's record is never replaced until Forget drops it.
type checkedBackend struct {
	worklease.Backend
	m         *worklease.Manager
	clk       worklease.Clock
	monotonic bool
	counts    *eventCounts // nil unless observed
	tracks    *grantTracks // carried across restarts

	recMu   sync.Mutex     // guards records and dropped
	records map[string]any // each domain's record, by identity
	dropped []any          // records Forget dropped

	mem      *memjournal.Journal // journalMem's
	dir      string              // journalWAL's
	restarts int
}

// grantTracks is what checkedBackends learn of the grants of their
// domains, across restarts, from the calls that go through them.
type grantTracks struct {
	mu     sync.Mutex // guards the fields below
	grants map[string]uint64
	last   map[string]worklease.Token // the latest grant's token of each domain
	// forgotten: Forget dropped a domain, after which fences only grow
	// (the Manager keeps the fences of forgotten domains as a floor that
	// other domains may share).
	forgotten bool
	errs      []error
}

func newGrantTracks() *grantTracks {
	return &grantTracks{grants: map[string]uint64{}, last: map[string]worklease.Token{}}
}

// granted checks the fence of a grant in d: the number of grants in d so
// far, this one included, until a domain is forgotten.
func (cb *checkedBackend) granted(d string, tok worklease.Token) {
	g := cb.tracks
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grants[d]++
	g.last[d] = tok
	if !g.forgotten && tok.Fence() != g.grants[d] {
		g.errs = append(g.errs, fmt.Errorf("%q: grant %d has fence %d", d, g.grants[d], tok.Fence()))
	}
}

func (cb *checkedBackend) TryAcquire(ctx context.Context, d string, off int64) (worklease.AcquireResult, error) {
	res, err := cb.Backend.TryAcquire(ctx, d, off)
	if err == nil && res.Status == worklease.Acquired {
		cb.granted(d, res.Token)
	}
	return res, err
}

func (cb *checkedBackend) SucceedNext(ctx context.Context, d string, tok worklease.Token) (worklease.SucceedResult, error) {
	res, err := cb.Backend.SucceedNext(ctx, d, tok)
	if err == nil && res.Status == worklease.NextAcquired {
		cb.granted(d, res.Lease.Token)
	}
	return res, err
}

func (cb *checkedBackend) FailNext(ctx context.Context, d string, tok worklease.Token, cause error) (worklease.FailResult, error) {
	res, err := cb.Backend.FailNext(ctx, d, tok, cause)
	if err == nil && res.Status == worklease.GiveUpNextAcquired {
		cb.granted(d, res.Lease.Token)
	}
	return res, err
}

func (cb *checkedBackend) Claim(ctx context.Context, n int) ([]worklease.Claim, error) {
	cs, err := cb.Backend.Claim(ctx, n)
	for _, c := range cs {
		cb.granted(c.Domain, c.Token)
	}
	return cs, err
}

func (cb *checkedBackend) WaitClaim(ctx context.Context, n int, poll time.Duration) ([]worklease.Claim, error) {
	cs, err := cb.Backend.WaitClaim(ctx, n, poll)
	for _, c := range cs {
		cb.granted(c.Domain, c.Token)
	}
	return cs, err
}

func (cb *checkedBackend) ClaimNext(ctx context.Context, claims []worklease.Claim) ([]worklease.Claim, []error, error) {
	cs, errs, err := cb.Backend.ClaimNext(ctx, claims)
	for _, c := range cs {
		if !cb.repeated(c.Token, claims) {
			cb.granted(c.Domain, c.Token)
		}
	}
	return cs, errs, err
}

// repeated reports whether ClaimNext answered with tok, the latest grant
// of its domain, again, as it does a claim repeated: one of claims holds
// the token of the lease before it.
func (cb *checkedBackend) repeated(tok worklease.Token, claims []worklease.Claim) bool {
	g := cb.tracks
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range claims {
		if c.Token.Fence()+1 == tok.Fence() && c.Token.Serial() == tok.Serial() && g.last[c.Domain] == tok {
			return true
		}
	}
	return false
}

func (cb *checkedBackend) Forget(ctx context.Context, d string) error {
	err := cb.Backend.Forget(ctx, d)
	if err == nil {
		g := cb.tracks
		g.mu.Lock()
		g.forgotten = true
		g.mu.Unlock()
		cb.recMu.Lock()
		if rec, ok := cb.records[d]; ok && worklease.RecordOf(cb.m, d) == nil {
			cb.dropped = append(cb.dropped, rec)
			delete(cb.records, d)
		}
		cb.recMu.Unlock()
	}
	return err
}

// check is the Suite's Check: the Manager's invariants, the fences and
// records seen so far, Stats against the events observed, and the
// terminal offsets as stored against what Inspect and DeadLetters report.
func (cb *checkedBackend) check() error {
	if err := worklease.CheckInvariants(cb.m); err != nil {
		return err
	}
	g := cb.tracks
	g.mu.Lock()
	errs := slices.Clone(g.errs)
	g.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if cb.counts != nil {
		if want, got := cb.counts.stats(), cb.m.Stats(); want != got {
			return fmt.Errorf("Stats %+v, want the observed %+v", got, want)
		}
	}
	ctx := context.Background()
	domains, err := cb.m.Domains()
	if err != nil {
		return err
	}
	if err := cb.checkRecords(domains); err != nil {
		return err
	}
	leases, err := cb.m.Leases()
	if err != nil {
		return err
	}
	for _, d := range domains {
		i := slices.IndexFunc(leases, func(l worklease.LeaseInfo) bool { return l.Domain == d })
		if i >= 0 && !leases[i].ExpiresAt.IsZero() && !cb.clk.Now().Before(leases[i].ExpiresAt) {
			continue // Inspect would revoke the lease: leave that to the next call
		}
		info, err := cb.Backend.Inspect(ctx, d)
		if err != nil {
			return err
		}
		dls, err := cb.m.DeadLetters(d)
		if err != nil {
			return err
		}
		if err := cb.checkTerminal(d, info, dls); err != nil {
			return err
		}
	}
	return nil
}

// checkRecords checks that every domain has a record, and keeps it until
// Forget drops it: a record is never replaced, and a dropped one never
// comes back. A restart makes new records.
func (cb *checkedBackend) checkRecords(domains []string) error {
	cb.recMu.Lock()
	defer cb.recMu.Unlock()
	for _, d := range domains {
		rec := worklease.RecordOf(cb.m, d)
		switch prev, ok := cb.records[d]; {
		case rec == nil:
			return fmt.Errorf("%q is listed by Domains but has no record", d)
		case !ok:
			for _, old := range cb.dropped {
				if rec == old {
					return fmt.Errorf("%q: a forgotten record came back", d)
				}
			}
			cb.records[d] = rec
		case prev != rec:
			return fmt.Errorf("%q: record replaced", d)
		}
	}
	for d := range cb.records {
		if !slices.Contains(domains, d) {
			return fmt.Errorf("%q has a record but Domains does not list it", d)
		}
	}
	return nil
}

// checkTerminal compares d's terminal offsets as the Manager stores them
// with what Inspect and DeadLetters report.
func (cb *checkedBackend) checkTerminal(d string, info worklease.DomainInfo, dls []worklease.DeadLetter) error {
	var dead []int64
	for _, dl := range dls {
		dead = append(dead, dl.Offset)
	}
	if !cb.monotonic {
		processed, failed := worklease.Terminal(cb.m, d)
		if int64(len(processed)) != info.Processed || int64(len(failed)) != info.Failed || !slices.Equal(failed, dead) {
			return fmt.Errorf("%q: stored processed %v, failed %v; Inspect %+v, dead letters %v", d, processed, failed, info, dead)
		}
		return nil
	}
	runs, failed := worklease.TerminalRuns(cb.m, d)
	if !slices.Equal(failed, dead) || int64(len(failed)) != info.Failed {
		return fmt.Errorf("%q: stored failed %v; Inspect %+v, dead letters %v", d, failed, info, dead)
	}
	hw := int64(-1)
	switch {
	case len(runs) == 1 && runs[0][0] == 0:
		hw = runs[0][1]
	case len(runs) != 0:
		return fmt.Errorf("%q: processed runs %v, want none or one from 0", d, runs)
	}
	// Every offset at or below hw counts as processed unless it is
	// failed, queued or in flight: probe those, hw and the offset after
	// it, the small offsets the model draws and those at the top.
	pending := func(off int64) bool {
		return slices.Contains(failed, off) || slices.Contains(info.Backlog, off) || info.Leased && info.Lease.Offset == off
	}
	probes := []int64{hw, math.MaxInt64 - 2, math.MaxInt64 - 1, math.MaxInt64}
	for off := range int64(20) {
		probes = append(probes, off)
	}
	if hw < math.MaxInt64 {
		probes = append(probes, hw+1)
	}
	probes = append(append(probes, failed...), info.Backlog...)
	if info.Leased {
		probes = append(probes, info.Lease.Offset)
	}
	var below int64
	for _, off := range slices.Compact(slices.Sorted(slices.Values(probes))) {
		if off < 0 {
			continue
		}
		want := off <= hw && !pending(off)
		if got := worklease.CountsProcessed(cb.m, d, off); got != want {
			return fmt.Errorf("%q: offset %d counts as processed: %v, want %v (hw %d)", d, off, got, want, hw)
		}
		if off <= hw && pending(off) {
			below++
		}
	}
	want := int64(0)
	if hw >= 0 {
		want = hw - below
		if below > 0 || hw < math.MaxInt64 {
			want++
		}
	}
	if info.Processed != want {
		return fmt.Errorf("%q: Inspect's Processed %d, want %d (hw %d, %d pending below it)", d, info.Processed, want, hw, below)
	}
	return nil
}

// eventCounts counts the events of each kind, as Stats does, and passes
// them on.
type eventCounts struct {
	inner worklease.Observer
	mu    sync.Mutex // guards n
	n     map[worklease.EventKind]uint64
}

func (c *eventCounts) Observe(e worklease.Event) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[worklease.EventKind]uint64{}
	}
	c.n[e.Kind]++
	c.mu.Unlock()
	c.inner.Observe(e)
}

func (c *eventCounts) stats() worklease.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	return worklease.Stats{
		Acquired: n[worklease.EventAcquired], Enqueued: n[worklease.EventEnqueued], Processed: n[worklease.EventProcessed],
		Retried: n[worklease.EventRetrying], DeadLettered: n[worklease.EventDeadLettered], Expired: n[worklease.EventExpired],
		Requeued: n[worklease.EventRequeued], Extended: n[worklease.EventExtended], Rejected: n[worklease.EventRejected],
		OutOfOrder: n[worklease.EventOutOfOrder], Killed: n[worklease.EventKilled], Redriven: n[worklease.EventRedriven],
		Released: n[worklease.EventReleased], Paused: n[worklease.EventPaused], Resumed: n[worklease.EventResumed],
		Forgotten: n[worklease.EventForgotten],
		Cancelled: n[worklease.EventCancelled],
	}
}
