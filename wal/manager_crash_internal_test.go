package wal

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
)

// The crash model at the Manager level. A single goroutine drives a Manager,
// journaled to a Log on the crash-simulating memFS, through a random workload
// of every call that changes state (and some that only may, such as Inspect
// revoking an expired lease). After every call returns, the test records the
// Manager's observable state: that state is acknowledged from the memFS
// operation at which the call returned. Then, for every prefix of the memFS
// operations, it crashes the file system, reopens the log, builds a new
// Manager on it and compares.
//
// The exact property, for one goroutine calling sequentially: let call i be
// the last call that returned within the first n operations. Call i+1 is then
// the only call in flight at the crash, and no later call has started. Under
// SyncAlways the recovered Manager must be in exactly the state after call i,
// or, if call i+1 had performed an operation before the crash, the state
// after call i+1: never an acknowledged call lost, at most the one in flight
// gained, nothing else. A call's records go out as one batch closed by a
// commit marker (one goroutine appends them all, then waits once), which
// recovery keeps whole or cuts whole, so no state between the two is
// possible.
//
// The weaker sync modes make weaker promises, which the test checks too.
// SyncInterval acknowledges a call once its records are written to the
// operating system, not fsynced; SyncNone once they are appended, and writes
// them at its next write-behind tick. A crash of the machine drops the page
// cache, so under either it can lose acknowledged calls: everything since the
// last fsync (a snapshot, a segment switch, an interval tick, Close). They
// are not expected to pass the exact check under a machine crash. They must
// still recover the state after some prefix of the calls, never earlier than
// the last point known to be synced. A crash of the process alone keeps every
// write the kernel accepted, synced or not (memFS.processCrashAt): there,
// SyncInterval must pass the exact check, and SyncNone must recover the state
// after some call no earlier than the last point known to be written (a
// write-behind tick, a snapshot, Close). And since a caller may act on what a
// recovered Manager reports, the state recovered after a process crash must
// survive a machine crash that follows it before anything else is done: Open
// syncs what it recovered.

// managerCrashBase is the workload's starting time. A Manager that reads its
// clock at this time sees no lease as expired (every expiry is later), so
// Inspect at this time observes a domain without changing it.
var managerCrashBase = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// crashDomains are the domains the workload uses.
var crashDomains = []string{"alpha", "beta", "γ/δ"}

type managerCrashConfig struct {
	name    string
	sync    SyncMode
	seed    uint64
	calls   int
	ttl     time.Duration // 0: leases never expire
	retries int
	lifo    bool
	park    bool
	segment int64 // segment size; small ones make the log rotate often
}

func (c managerCrashConfig) managerOptions(clk worklease.Clock) []worklease.Option {
	opts := []worklease.Option{worklease.WithMaxRetries(c.retries), worklease.WithClock(clk)}
	if c.ttl > 0 {
		opts = append(opts, worklease.WithLeaseTTL(c.ttl))
	}
	if c.lifo {
		opts = append(opts, worklease.WithOrdering(worklease.LIFO))
	}
	if c.park {
		opts = append(opts, worklease.WithParkOnDeadLetter())
	}
	return opts
}

// logOptions are the options of every Open, the workload's and the
// recoveries'. Snapshots are only taken on demand, by the workload's
// Snapshot calls, so that no background goroutine interleaves its file
// operations with the calls': the operation log is deterministic.
func (c managerCrashConfig) logOptions(tickOpt Option) []Option {
	opts := []Option{WithSyncMode(c.sync), WithSegmentSize(c.segment), WithSnapshotEvery(0)}
	if tickOpt != nil {
		opts = append(opts, tickOpt)
	}
	return opts
}

// exact reports whether a machine crash must recover exactly the last call
// acknowledged (or the one in flight), and exactAfterProcessCrash whether a
// crash of the process must.
func (c managerCrashConfig) exact() bool                  { return c.sync == SyncAlways }
func (c managerCrashConfig) exactAfterProcessCrash() bool { return c.sync != SyncNone }

// ticked reports whether the mode's goroutine runs on a ticker.
func (c managerCrashConfig) ticked() bool { return c.sync.policy != syncAlways }

// mstate is what a Manager shows of its state, in a form that compares
// equal across a restart (times in UTC, causes as text).
type mstate struct {
	Domains   map[string]worklease.DomainInfo
	Dead      []string           // every dead letter, as text
	Processed map[string][]int64 // processed offsets per domain; see observe
}

func (s mstate) String() string {
	var b strings.Builder
	for _, d := range crashDomains {
		info := s.Domains[d]
		fmt.Fprintf(&b, "%s: leased=%v", d, info.Leased)
		if info.Leased {
			l := info.Lease
			fmt.Fprintf(&b, " (offset %d, token %v, acquired %v, expires %v, retries %d)", l.Offset, l.Token, l.AcquiredAt.Format(time.TimeOnly), l.ExpiresAt.Format(time.TimeOnly), l.RetryCount)
		}
		fmt.Fprintf(&b, " paused=%v backlog=%v processed=%d%v failed=%d\n", info.Paused, info.Backlog, info.Processed, s.Processed[d], info.Failed)
	}
	fmt.Fprintf(&b, "dead letters: %v", s.Dead)
	return b.String()
}

func utcTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// observe reads m's state with Inspect and DeadLetters. m's clock must read
// managerCrashBase, so that Inspect expires nothing: observe then changes
// nothing and performs no file operation. Processed is left for the caller.
func observe(t testing.TB, m *worklease.Manager) mstate {
	t.Helper()
	s := mstate{Domains: map[string]worklease.DomainInfo{}, Processed: map[string][]int64{}}
	for _, d := range crashDomains {
		info, err := m.Inspect(d)
		require.NoError(t, err)
		info.Lease.AcquiredAt = utcTime(info.Lease.AcquiredAt)
		info.Lease.ExpiresAt = utcTime(info.Lease.ExpiresAt)
		s.Domains[d] = info
	}
	dead, err := m.DeadLetters("")
	require.NoError(t, err)
	for _, dl := range dead {
		s.Dead = append(s.Dead, fmt.Sprintf("%s/%d attempts=%d at=%v cause=%q", dl.Domain, dl.Offset, dl.Attempts, utcTime(dl.At), errText(dl.Cause)))
	}
	return s
}

// An mcall is one Manager call of the workload.
type mcall struct {
	what  string
	start int // memFS operations done when it began
	end   int // memFS operations done when it returned: acknowledged from then on
}

// A managerCrashRun is a workload run: its file system, its calls and the
// state after each.
type managerCrashRun struct {
	cfg    managerCrashConfig
	fs     *memFS
	calls  []mcall  // calls[0] is New, which acknowledges the empty state
	states []mstate // states[k] is the state after calls[k]
	// synced lists the points where everything acknowledged so far was
	// fsynced: at memFS operation syncedAt[j], every call up to
	// syncedCall[j] was durable even against a machine crash.
	syncedAt, syncedCall []int
	// written lists the points where everything acknowledged so far was
	// written to the operating system, and survives a crash of the process:
	// every synced point, and SyncNone's write-behind ticks.
	writtenAt, writtenCall []int
	// bufferedAtTick counts SyncNone's ticks that found records buffered,
	// not yet written: the workload exercised the write-behind.
	bufferedAtTick int
}

// runManagerWorkload runs cfg's workload and closes the Manager.
func runManagerWorkload(t *testing.T, cfg managerCrashConfig) *managerCrashRun {
	r := &managerCrashRun{cfg: cfg, fs: newMemFS()}
	var tickOpt Option
	var tick chan time.Time
	if cfg.ticked() {
		tickOpt, tick, _ = manualTicker()
	}
	l, err := Open(dir, append(cfg.logOptions(tickOpt), withFS(r.fs))...)
	require.NoError(t, err)
	clk := clock.NewFake(managerCrashBase)
	m, err := worklease.New(append(cfg.managerOptions(clk), worklease.WithJournal(l))...)
	require.NoError(t, err)
	// Should the test fail, the log's goroutine must not outlive the
	// synctest bubble. Close is idempotent.
	t.Cleanup(func() { _ = m.Close() })

	rng := rand.New(rand.NewPCG(cfg.seed, 0x6d616e61676572))
	var tokens []worklease.Token // every token seen, to replay stale ones
	state := mstate{Domains: map[string]worklease.DomainInfo{}, Processed: map[string][]int64{}}
	for _, d := range crashDomains {
		state.Domains[d] = worklease.DomainInfo{}
	}
	r.calls = append(r.calls, mcall{what: "New", start: 0, end: 0})
	r.states = append(r.states, state)

	// processed is the processed offsets per domain as the call in progress
	// leaves them: Succeed adds its lease's offset, Forget drops the domain.
	var processed map[string][]int64
	// call runs one Manager call and records what it acknowledged.
	call := func(what string, f func() error) {
		t.Helper()
		processed = maps.Clone(state.Processed)
		start := r.fs.opCount()
		err := f()
		end := r.fs.opCount()
		require.False(t, errors.Is(err, worklease.ErrJournalFailed) || errors.Is(err, worklease.ErrClosed), "%s: %v", what, err)
		if err != nil {
			what += ": " + err.Error()
		}
		// Read the state as of the base time, so that reading it expires
		// nothing; then put the workload's time back.
		now := clk.Now()
		clk.Set(managerCrashBase)
		next := observe(t, m)
		clk.Set(now)
		require.Equal(t, end, r.fs.opCount(), "observing the state performed no file operation")
		next.Processed = processed
		r.calls = append(r.calls, mcall{what: what, start: start, end: end})
		r.states = append(r.states, next)
		state = next
	}
	written := func() {
		r.writtenAt = append(r.writtenAt, r.fs.opCount())
		r.writtenCall = append(r.writtenCall, len(r.calls)-1)
	}
	synced := func() {
		written()
		r.syncedAt = append(r.syncedAt, r.fs.opCount())
		r.syncedCall = append(r.syncedCall, len(r.calls)-1)
	}
	// token picks the domain's lease token, mostly, or a stale or zero one.
	token := func(d string) worklease.Token {
		if info := state.Domains[d]; info.Leased && rng.IntN(10) < 8 {
			return info.Lease.Token
		}
		if len(tokens) == 0 || rng.IntN(4) == 0 {
			return worklease.Token{}
		}
		return tokens[rng.IntN(len(tokens))]
	}
	// offset picks an offset of d: one it is known by, mostly.
	offset := func(d string) int64 {
		info := state.Domains[d]
		switch k := rng.IntN(10); {
		case k < 3 && info.Leased:
			return info.Lease.Offset
		case k < 6 && len(info.Backlog) > 0:
			return info.Backlog[rng.IntN(len(info.Backlog))]
		}
		return int64(rng.IntN(12))
	}

	for range cfg.calls {
		k := rng.IntN(100)
		d := crashDomains[rng.IntN(len(crashDomains))]
		if k >= 30 && k < 67 && rng.IntN(5) > 0 { // Succeed, Fail, Extend: mostly of a lease
			var leased []string
			for _, d := range crashDomains {
				if state.Domains[d].Leased {
					leased = append(leased, d)
				}
			}
			if len(leased) > 0 {
				d = leased[rng.IntN(len(leased))]
			}
		}
		info := state.Domains[d]
		switch {
		case k < 30: // TryAcquire, mostly of what the domain can grant
			off := offset(d)
			if !info.Leased && !info.Paused && len(info.Backlog) > 0 && rng.IntN(4) > 0 {
				off = info.Backlog[0]
			}
			call(fmt.Sprintf("TryAcquire(%s, %d)", d, off), func() error {
				res, err := m.TryAcquire(d, off)
				if res.Status == worklease.Acquired {
					tokens = append(tokens, res.Token)
				}
				return err
			})
		case k < 48: // Succeed
			tok := token(d)
			call(fmt.Sprintf("Succeed(%s, %v)", d, tok), func() error {
				_, err := m.Succeed(d, tok)
				if err == nil {
					// The lease of the state before, which the call did not
					// expire, since it succeeded.
					processed[d] = append(slices.Clone(processed[d]), info.Lease.Offset)
				}
				return err
			})
		case k < 62: // Fail
			tok := token(d)
			var cause error
			if rng.IntN(4) > 0 {
				cause = fmt.Errorf("boom %d", rng.IntN(100))
			}
			call(fmt.Sprintf("Fail(%s, %v, %v)", d, tok, cause), func() error {
				_, err := m.Fail(d, tok, cause)
				return err
			})
		case k < 67: // Extend
			tok, by := token(d), time.Duration(1+rng.IntN(20))*time.Second
			call(fmt.Sprintf("Extend(%s, %v, %v)", d, tok, by), func() error {
				_, err := m.Extend(d, tok, by)
				return err
			})
		case k < 72: // Kill
			off := offset(d)
			call(fmt.Sprintf("Kill(%s, %d)", d, off), func() error {
				_, err := m.Kill(d, off, fmt.Sprint("killed ", off))
				return err
			})
		case k < 76: // Redrive, mostly of a dead letter
			off := offset(d)
			if dead, _ := m.DeadLetters(d); len(dead) > 0 && rng.IntN(4) > 0 {
				off = dead[rng.IntN(len(dead))].Offset
			}
			call(fmt.Sprintf("Redrive(%s, %d)", d, off), func() error {
				_, err := m.Redrive(d, off)
				return err
			})
		case k < 79:
			call(fmt.Sprintf("ForceRelease(%s)", d), func() error {
				_, err := m.ForceRelease(d)
				return err
			})
		case k < 82:
			call(fmt.Sprintf("Pause(%s)", d), func() error { return m.Pause(d) })
		case k < 86:
			call(fmt.Sprintf("Resume(%s)", d), func() error {
				_, err := m.Resume(d)
				return err
			})
		case k < 89:
			call(fmt.Sprintf("Forget(%s)", d), func() error {
				err := m.Forget(d)
				if err == nil {
					delete(processed, d)
				}
				return err
			})
		case k < 92:
			call("Snapshot", m.Snapshot)
			synced() // a snapshot syncs every record it covers, whatever the mode
		case k < 94: // Inspect at the workload's time: it may expire a lease
			call(fmt.Sprintf("Inspect(%s)", d), func() error {
				_, err := m.Inspect(d)
				return err
			})
		case k < 96:
			if cfg.ttl > 0 {
				call("Reap", func() error {
					_, err := m.Reap()
					return err
				})
			}
		case k < 98 && tick != nil:
			// The workload runs in a synctest bubble: once the sync loop
			// is blocked again, waiting for the next tick, it has written
			// (SyncNone) or synced (SyncInterval) everything, and it does
			// nothing while the calls go on.
			l.mu.Lock()
			if len(l.buf) > 0 {
				r.bufferedAtTick++
			}
			l.mu.Unlock()
			tick <- time.Time{}
			synctest.Wait()
			if cfg.sync == SyncNone {
				written()
			} else {
				synced()
			}
		default: // time passes; with a TTL, leases expire
			clk.Advance(time.Duration(rng.Int64N(int64(15 * time.Second))))
		}
		for _, d := range crashDomains {
			require.Len(t, state.Processed[d], int(state.Domains[d].Processed), "%s: the processed offsets tracked", d)
		}
	}
	// Close acknowledges nothing new, and everything is synced once it
	// returns.
	start := r.fs.opCount()
	require.NoError(t, m.Close())
	r.calls = append(r.calls, mcall{what: "Close", start: start, end: r.fs.opCount()})
	r.states = append(r.states, state)
	synced()
	return r
}

// allowed returns the indices of the states a crash after the first n
// operations may leave: the last call acknowledged by then, and the call in
// flight if it had begun changing the files. Under a weaker sync mode and a
// machine crash, any state from the last one known synced on; under SyncNone
// and a process crash, any state from the last one known written on.
func (r *managerCrashRun) allowed(n int, machine bool) []int {
	i := 0
	for k, c := range r.calls {
		if c.end <= n {
			i = k
		}
	}
	// since returns the last call known kept at one of the points at.
	since := func(at, call []int) int {
		lo := 0
		for j := range at {
			if at[j] <= n {
				lo = max(lo, call[j])
			}
		}
		return lo
	}
	lo := i
	switch {
	case machine && !r.cfg.exact():
		lo = since(r.syncedAt, r.syncedCall)
	case !machine && !r.cfg.exactAfterProcessCrash():
		lo = since(r.writtenAt, r.writtenCall)
	}
	out := []int{}
	for k := lo; k <= i; k++ {
		out = append(out, k)
	}
	if i+1 < len(r.calls) && r.calls[i+1].start < n {
		out = append(out, i+1)
	}
	return out
}

// recoverManager opens the log in fsys and builds a Manager on it, its clock
// at the base time so that observing it changes nothing.
func (r *managerCrashRun) recoverManager(t testing.TB, fsys *memFS, what string) *worklease.Manager {
	t.Helper()
	var tickOpt Option
	if r.cfg.ticked() {
		tickOpt, _, _ = manualTicker() // never ticks
	}
	l, err := Open(dir, append(r.cfg.logOptions(tickOpt), withFS(fsys))...)
	require.NoError(t, err, what)
	m, err := worklease.New(append(r.cfg.managerOptions(clock.NewFake(managerCrashBase)), worklease.WithJournal(l))...)
	if err != nil {
		_ = l.Close()
	}
	require.NoError(t, err, what)
	return m
}

// probeProcessed reports which of the candidates' processed offsets m holds
// processed. A TryAcquire of a processed offset changes nothing; one of an
// offset that is not may, so the caller has observed m first.
func (r *managerCrashRun) probeProcessed(t testing.TB, m *worklease.Manager, candidates []int, what string) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, d := range crashDomains {
		var union []int64
		for _, k := range candidates {
			union = append(union, r.states[k].Processed[d]...)
		}
		slices.Sort(union)
		for _, off := range slices.Compact(union) {
			res, err := m.TryAcquire(d, off)
			if err == nil && res.Status == worklease.AlreadyProcessed {
				out[d] = append(out[d], off)
			}
		}
	}
	return out
}

// match checks that got is one of the candidate states, its processed
// offsets restricted to those the candidates name (Inspect's count covers
// the rest).
func (r *managerCrashRun) match(t testing.TB, got mstate, candidates []int, what string) {
	t.Helper()
	for _, k := range candidates {
		want := r.states[k]
		wantProcessed := map[string][]int64{}
		for d, offs := range want.Processed {
			if len(offs) > 0 {
				wantProcessed[d] = slices.Sorted(slices.Values(offs))
			}
		}
		if reflect.DeepEqual(got.Domains, want.Domains) && slices.Equal(got.Dead, want.Dead) && reflect.DeepEqual(got.Processed, wantProcessed) {
			return
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: the recovered state is none of the allowed ones.\nrecovered:\n%v\n", what, got)
	for _, k := range candidates {
		fmt.Fprintf(&b, "after call %d, %s (operations %d to %d):\n%v\n", k, r.calls[k].what, r.calls[k].start, r.calls[k].end, r.states[k])
	}
	t.Fatal(b.String())
}

// check crashes the run after every step-th operation: as the machine in
// each of modes, and as the process (followed by a machine crash once the
// recovered Manager is built).
func (r *managerCrashRun) check(t *testing.T, step int, modes ...crashMode) {
	ops := r.fs.ops()
	if testing.Short() {
		step *= 3
	}
	// st is the state after the first n operations, built up one
	// operation at a time rather than replayed from the start for each n
	// (as memFS.crashAt does).
	st := r.fs.stateAt(0)
	for n := 0; n <= len(ops); n++ {
		if n > 0 {
			if got := st.apply(ops[n-1]); got.ino != ops[n-1].ino {
				t.Fatalf("memfs: replaying %v gave inode %d", ops[n-1], got.ino)
			}
		}
		if n%step != 0 && n != len(ops) {
			continue
		}
		describe := func(how string) string {
			s := fmt.Sprintf("%s crash after %d of %d operations", how, n, len(ops))
			if n > 0 {
				s += fmt.Sprintf(", the last %v", ops[n-1])
			}
			return s
		}
		for _, mode := range modes {
			what := describe(fmt.Sprintf("machine (%v)", mode))
			candidates := r.allowed(n, true)
			rng := rand.New(rand.NewPCG(r.cfg.seed, uint64(n)))
			m := r.recoverManager(t, fromState(st.clone().crash(mode, rng)), what)
			got := observe(t, m)
			got.Processed = r.probeProcessed(t, m, candidates, what)
			require.NoError(t, m.Close(), what)
			r.match(t, got, candidates, what)
		}

		what := describe("process")
		candidates := r.allowed(n, false)
		proc := fromState(st.clone())
		m := r.recoverManager(t, proc, what)
		got := observe(t, m)
		machine := proc.crash(crashDropAll, 0) // before anything else is done
		got.Processed = r.probeProcessed(t, m, candidates, what)
		require.NoError(t, m.Close(), what)
		r.match(t, got, candidates, what)

		what += ", then a machine crash"
		m = r.recoverManager(t, machine, what)
		again := observe(t, m)
		again.Processed = r.probeProcessed(t, m, candidates, what)
		require.NoError(t, m.Close(), what)
		require.Equal(t, got, again, "%s: what the first recovery reported survives", what)
	}
}

// TestManagerCrash runs random Manager workloads on a journal in the memFS
// and crashes them after every file operation. Under SyncAlways, every
// machine crash (dropping everything unsynced, keeping everything, keeping a
// random prefix, keeping a random subset of the writes) must recover exactly
// the state after the last acknowledged call, or after the call in flight.
// Under SyncInterval, a process crash must do the same; under SyncNone, it
// must recover the state after some call no earlier than the last
// write-behind tick. Under both, a machine crash must recover the state after
// some call no earlier than the last sync.
func TestManagerCrash(t *testing.T) {
	t.Parallel()
	configs := []managerCrashConfig{
		{name: "SyncAlways", sync: SyncAlways, seed: 1, calls: 400, retries: 1, segment: 4 << 10},
		{name: "SyncAlways/rotate", sync: SyncAlways, seed: 2, calls: 400, retries: 2, segment: MinSegmentSize},
		{name: "SyncAlways/ttl", sync: SyncAlways, seed: 3, calls: 400, retries: 1, segment: 2 << 10, ttl: 10 * time.Second},
		{name: "SyncAlways/ttl-lifo-park", sync: SyncAlways, seed: 4, calls: 400, retries: 0, segment: MinSegmentSize, ttl: 10 * time.Second, lifo: true, park: true},
		{name: "SyncNone", sync: SyncNone, seed: 5, calls: 400, retries: 1, segment: MinSegmentSize, ttl: 10 * time.Second},
		{name: "SyncInterval", sync: SyncInterval(time.Hour), seed: 6, calls: 400, retries: 2, segment: 2 << 10},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			var r *managerCrashRun
			if cfg.ticked() {
				// The sync loop's goroutine must not interleave its file
				// operations with the calls': see the tick in runManagerWorkload.
				synctest.Test(t, func(t *testing.T) { r = runManagerWorkload(t, cfg) })
			} else {
				r = runManagerWorkload(t, cfg)
			}
			if cfg.sync == SyncNone {
				require.Positive(t, r.bufferedAtTick, "the write-behind wrote buffered records")
			}
			r.check(t, 1, crashDropAll, crashKeepAll, crashRandom, crashReorder)
		})
	}
}
