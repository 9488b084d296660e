package worklease_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// These tests are meant for -race: many goroutines share one Manager, and
// afterwards the outcome is checked against what the contract allows, which
// does not depend on how the goroutines were scheduled.

// concAll runs f(i) for i in [0, n), each in its own goroutine, releases them
// together, and returns their results in order of i.
func concAll[R any](n int, f func(i int) R) []R {
	start := make(chan struct{})
	out := make([]R, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

type concAcquire struct {
	res worklease.AcquireResult
	err error
}

const concGoroutines = 100

func TestConcurrentTryAcquireSameOffset(t *testing.T) {
	t.Parallel()
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	m, err := worklease.New()
	require.NoError(t, err)
	for round := range rounds {
		// Even rounds race to create a new domain's record; odd rounds
		// race on the same domain, now idle with a history.
		domain := fmt.Sprintf("d%d", round/2)
		offset := int64(round)
		results := concAll(concGoroutines, func(int) concAcquire {
			res, err := m.TryAcquire(domain, offset)
			return concAcquire{res, err}
		})

		winner := -1
		for i, r := range results {
			require.NoError(t, r.err, "round %d, goroutine %d", round, i)
			if r.res.Status == worklease.Acquired {
				require.Equal(t, -1, winner, "round %d: goroutines %d and %d both acquired", round, winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "round %d: nobody acquired", round)
		won := results[winner].res
		require.False(t, won.Token.IsZero())
		for i, r := range results {
			if i == winner {
				continue
			}
			// AlreadyAcquired reports the holder's lease: the same token,
			// grant time and retry count.
			want := won
			want.Status = worklease.AlreadyAcquired
			require.Equal(t, want, r.res, "round %d, goroutine %d", round, i)
		}

		res, err := m.Succeed(domain, won.Token)
		require.NoError(t, err)
		require.Equal(t, worklease.SucceedResult{Status: worklease.NoBacklog}, res)
	}
	require.NoError(t, worklease.CheckInvariants(m))
}

func TestConcurrentRecordCreation(t *testing.T) {
	t.Parallel()
	domains, goroutines := 2000, 8
	if testing.Short() {
		domains = 500
	}
	names := make([]string, domains)
	for i := range names {
		names[i] = fmt.Sprintf("new-%04d", i)
	}
	for _, shards := range []int{1, worklease.DefaultShards} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			m, err := worklease.New(worklease.WithShards(shards))
			require.NoError(t, err)
			// The goroutines walk the same new domains in the same order,
			// so they keep arriving at a domain together, before it has a
			// record: exactly one record, and one lease, per domain.
			results := concAll(goroutines, func(int) []concAcquire {
				out := make([]concAcquire, domains)
				for i, name := range names {
					res, err := m.TryAcquire(name, 0)
					out[i] = concAcquire{res, err}
				}
				return out
			})
			for i, name := range names {
				winners := 0
				var tok worklease.Token
				for g := range goroutines {
					r := results[g][i]
					require.NoError(t, r.err)
					if r.res.Status == worklease.Acquired {
						winners++
					}
					if g == 0 {
						tok = r.res.Token
					}
					require.Equal(t, tok, r.res.Token, "%s: goroutines saw different leases", name)
				}
				require.Equal(t, 1, winners, "%s: acquired %d times", name, winners)
				info, err := m.Inspect(name)
				require.NoError(t, err)
				require.Equal(t, tok, info.Lease.Token, "%s: lease replaced", name)
				require.Equal(t, uint64(1), tok.Fence(), "%s", name)
			}
			require.NoError(t, worklease.CheckInvariants(m))
		})
	}
}

func TestConcurrentTryAcquireDistinctOffsets(t *testing.T) {
	t.Parallel()
	m, err := worklease.New()
	require.NoError(t, err)
	const domain = "d"
	// Goroutine i asks for offset i of an idle domain: one gets the lease,
	// the others queue behind it, each once, in whatever order they won
	// the lock.
	results := concAll(concGoroutines, func(i int) concAcquire {
		res, err := m.TryAcquire(domain, int64(i))
		return concAcquire{res, err}
	})
	winner := -1
	for i, r := range results {
		require.NoError(t, r.err)
		switch r.res.Status {
		case worklease.Acquired:
			require.Equal(t, -1, winner, "goroutines %d and %d both acquired", winner, i)
			winner = i
		case worklease.Enqueued:
			require.Zero(t, r.res.Token)
		default:
			require.Failf(t, "unexpected status", "goroutine %d: %v", i, r.res.Status)
		}
	}
	require.NotEqual(t, -1, winner)
	require.NoError(t, worklease.CheckInvariants(m))

	info, err := m.Inspect(domain)
	require.NoError(t, err)
	require.True(t, info.Leased)
	require.Equal(t, int64(winner), info.Lease.Offset)
	queued := slices.Clone(info.Backlog)
	require.Len(t, queued, concGoroutines-1)
	sorted := slices.Sorted(slices.Values(queued))
	for i, off := range sorted { // every other offset, exactly once
		want := int64(i)
		if i >= winner {
			want++
		}
		require.Equal(t, want, off)
	}

	// Drain by following hints: they name the backlog in its order.
	tok := results[winner].res.Token
	for _, want := range queued {
		res, err := m.Succeed(domain, tok)
		require.NoError(t, err)
		require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: want}, res)
		got, err := m.TryAcquire(domain, want)
		require.NoError(t, err)
		require.Equal(t, worklease.Acquired, got.Status)
		tok = got.Token
	}
	res, err := m.Succeed(domain, tok)
	require.NoError(t, err)
	require.Equal(t, worklease.NoBacklog, res.Status)
	processed, failed := worklease.Terminal(m, domain)
	require.Len(t, processed, concGoroutines)
	require.Empty(t, failed)
	require.NoError(t, worklease.CheckInvariants(m))
}

func TestConcurrentSucceedSameToken(t *testing.T) {
	t.Parallel()
	m, err := worklease.New()
	require.NoError(t, err)
	const domain = "d"
	got, err := m.TryAcquire(domain, 7)
	require.NoError(t, err)
	require.Equal(t, worklease.Acquired, got.Status)

	type outcome struct {
		res worklease.SucceedResult
		err error
	}
	results := concAll(concGoroutines, func(int) outcome {
		res, err := m.Succeed(domain, got.Token)
		return outcome{res, err}
	})
	wins := 0
	for i, r := range results {
		if r.err == nil {
			wins++
			require.Equal(t, worklease.SucceedResult{Status: worklease.NoBacklog}, r.res)
			continue
		}
		require.ErrorIs(t, r.err, worklease.ErrNoLease, "goroutine %d", i)
		require.Zero(t, r.res)
	}
	require.Equal(t, 1, wins, "Succeed with one token must win exactly once")
	processed, failed := worklease.Terminal(m, domain)
	require.Equal(t, []int64{7}, processed)
	require.Empty(t, failed)
	require.NoError(t, worklease.CheckInvariants(m))
}

func TestConcurrentFailSameToken(t *testing.T) {
	t.Parallel()
	const maxRetries = 5
	m, err := worklease.New(worklease.WithMaxRetries(maxRetries))
	require.NoError(t, err)
	const domain = "d"
	got, err := m.TryAcquire(domain, 3)
	require.NoError(t, err)
	require.Equal(t, worklease.Acquired, got.Status)
	_, err = m.TryAcquire(domain, 4)
	require.NoError(t, err)

	type outcome struct {
		res worklease.FailResult
		err error
	}
	results := concAll(concGoroutines, func(int) outcome {
		res, err := m.Fail(domain, got.Token, errors.New("attempt failed"))
		return outcome{res, err}
	})
	// The Fails are serialized: maxRetries of them schedule retries 1..n
	// in turn, the next gives up, and the rest find no lease.
	var retries []int
	giveUps := 0
	for i, r := range results {
		switch {
		case r.err != nil:
			require.ErrorIs(t, r.err, worklease.ErrNoLease, "goroutine %d", i)
			require.Zero(t, r.res)
		case r.res.Status == worklease.RetryScheduled:
			retries = append(retries, r.res.RetryCount)
		default:
			giveUps++
			require.Equal(t, worklease.FailResult{Status: worklease.GiveUpNextHint, RetryCount: maxRetries, Next: 4}, r.res)
		}
	}
	require.Equal(t, 1, giveUps)
	slices.Sort(retries)
	require.Equal(t, []int{1, 2, 3, 4, 5}, retries)
	processed, failed := worklease.Terminal(m, domain)
	require.Empty(t, processed)
	require.Equal(t, []int64{3}, failed)
	require.NoError(t, worklease.CheckInvariants(m))
}

// orchConfig sizes one run of the orchestrator stress test.
type orchConfig struct {
	domains    int
	offsets    int // per domain
	producers  int // each owns every producers-th domain
	workers    int
	maxRetries int
	observers  int // goroutines calling Inspect and CheckInvariants throughout
}

// An orchGrant is a lease someone acquired and that a worker must process.
type orchGrant struct {
	domain int
	offset int64
	token  worklease.Token
}

const (
	orchPending uint8 = iota
	orchSucceeded
	orchFailed
)

// orchLog is what the goroutines processing one domain record. Only the
// goroutine holding the domain's lease touches it: the lease is its lock,
// and the Manager's per-domain mutex orders one holder's writes before the
// next holder's. A Manager that granted two leases at once would show up
// here as a data race.
type orchLog struct {
	order    []int64 // offsets in the order processing started
	attempts []int   // per offset
	outcome  []uint8 // per offset
}

// orchestrator runs the whole protocol (TryAcquire, Succeed, Fail and their
// hints) against one Manager.
type orchestrator struct {
	t      *testing.T
	cfg    orchConfig
	m      *worklease.Manager
	names  []string
	logs   []orchLog
	leases chan orchGrant // producers to workers

	grants  atomic.Int64 // Acquired results
	helps   atomic.Int64 // producers that found a domain between a release and its hint being followed
	collide atomic.Int64 // hints found already taken
}

func TestConcurrentOrchestrator(t *testing.T) {
	t.Parallel()
	domains, offsets := 200, 50
	if testing.Short() {
		domains, offsets = 40, 20
	}
	tests := []struct {
		name string
		cfg  orchConfig
	}{
		{"maxRetries=0", orchConfig{domains: domains, offsets: offsets, producers: 4, workers: 16, maxRetries: 0}},
		{"maxRetries=2", orchConfig{domains: domains, offsets: offsets, producers: 4, workers: 16, maxRetries: 2}},
		{"one domain", orchConfig{domains: 1, offsets: 20 * offsets, producers: 1, workers: 16, maxRetries: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runOrchestrator(t, tt.cfg)
		})
	}
}

func TestConcurrentObservers(t *testing.T) {
	t.Parallel()
	cfg := orchConfig{domains: 50, offsets: 50, producers: 2, workers: 8, maxRetries: 1, observers: 2}
	if testing.Short() {
		cfg.domains, cfg.offsets = 20, 20
	}
	runOrchestrator(t, cfg)
}

// runOrchestrator drives cfg.domains domains through the protocol: producers
// submit each domain's offsets in increasing order with TryAcquire; whoever
// gets a lease hands it to the workers, which succeed or fail at random,
// retry while Fail allows, and follow every hint. At the end every offset
// must be terminal exactly once, in offset order, with nothing left behind.
func runOrchestrator(t *testing.T, cfg orchConfig) {
	m, err := worklease.New(worklease.WithMaxRetries(cfg.maxRetries))
	require.NoError(t, err)
	o := &orchestrator{
		t:      t,
		cfg:    cfg,
		m:      m,
		names:  make([]string, cfg.domains),
		logs:   make([]orchLog, cfg.domains),
		leases: make(chan orchGrant, 2*cfg.workers),
	}
	for d := range cfg.domains {
		o.names[d] = fmt.Sprintf("domain-%03d", d)
		o.logs[d] = orchLog{attempts: make([]int, cfg.offsets), outcome: make([]uint8, cfg.offsets)}
	}

	var producers, workers, observers sync.WaitGroup
	for p := range cfg.producers {
		producers.Go(func() { o.produce(p) })
	}
	for w := range cfg.workers {
		rng := rand.New(rand.NewPCG(uint64(w), 0xfeed))
		workers.Go(func() {
			for g := range o.leases {
				o.work(rng, g)
			}
		})
	}
	done := make(chan struct{})
	for i := range cfg.observers {
		rng := rand.New(rand.NewPCG(uint64(i), 0x0b5))
		observers.Go(func() { o.observe(rng, done) })
	}
	producers.Wait()
	close(o.leases) // workers follow hints inline, so nothing is sent after the producers stop
	workers.Wait()
	close(done)
	observers.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d grants; %d submissions found a hint not yet followed; %d hints already taken",
		o.grants.Load(), o.helps.Load(), o.collide.Load())

	require.NoError(t, worklease.CheckInvariants(m))
	require.Equal(t, int64(cfg.domains*cfg.offsets), o.grants.Load(), "every offset is granted exactly once")
	all := make([]int64, cfg.offsets)
	for i := range all {
		all[i] = int64(i)
	}
	for d, name := range o.names {
		log := &o.logs[d]
		require.Equal(t, all, log.order, "%s: processing order", name)
		var wantProcessed, wantFailed []int64
		for off, out := range log.outcome {
			switch out {
			case orchSucceeded:
				wantProcessed = append(wantProcessed, int64(off))
				require.LessOrEqual(t, log.attempts[off], cfg.maxRetries+1, "%s: offset %d attempts", name, off)
			case orchFailed:
				wantFailed = append(wantFailed, int64(off))
				require.Equal(t, cfg.maxRetries+1, log.attempts[off], "%s: offset %d attempts", name, off)
			default:
				require.Failf(t, "offset never finished", "%s: offset %d", name, off)
			}
		}
		processed, failed := worklease.Terminal(m, name)
		require.Equal(t, wantProcessed, processed, "%s: processed", name)
		require.Equal(t, wantFailed, failed, "%s: failed", name)

		info, err := m.Inspect(name)
		require.NoError(t, err)
		require.Equal(t, worklease.DomainInfo{Processed: int64(len(processed)), Failed: int64(len(failed))}, info,
			"%s: lease or backlog left behind", name)
	}
}

// produce submits, for each offset in turn, that offset of every domain the
// producer owns. It is the only goroutine that submits to those domains, so
// each domain sees its offsets submitted in increasing order.
func (o *orchestrator) produce(p int) {
	rng := rand.New(rand.NewPCG(uint64(p), 0x9d))
	for off := range int64(o.cfg.offsets) {
		for d := p; d < o.cfg.domains; d += o.cfg.producers {
			if !o.submit(d, off) {
				return
			}
			if rng.IntN(4) == 0 {
				runtime.Gosched() // let the workers catch up, so that submissions meet releases
			}
		}
	}
}

// submit hands offset off of domain d to the Manager, and to a worker if it
// is granted at once. It reports false after reporting a failure.
func (o *orchestrator) submit(d int, off int64) bool {
	name := o.names[d]
	for {
		res, err := o.m.TryAcquire(name, off)
		var order *worklease.BacklogOrderError
		if errors.As(err, &order) {
			// The domain is idle with a backlog: a goroutine has just
			// released it and is about to follow its hint to the head.
			// Waiting for it would need a sleep; instead acquire the head
			// too. One of us gets it and the other sees AlreadyAcquired,
			// or AlreadyProcessed if the winner has finished it already.
			o.helps.Add(1)
			if order.Domain != name || order.Got != off || order.Expected >= off {
				o.t.Errorf("%s: TryAcquire(%d): %v", name, off, err)
				return false
			}
			head, err := o.m.TryAcquire(name, order.Expected)
			if err != nil {
				o.t.Errorf("%s: TryAcquire(head %d): %v", name, order.Expected, err)
				return false
			}
			switch head.Status {
			case worklease.Acquired:
				o.grants.Add(1)
				o.leases <- orchGrant{d, order.Expected, head.Token}
			case worklease.AlreadyAcquired, worklease.AlreadyProcessed, worklease.AlreadyFailed:
				o.collide.Add(1)
			default:
				o.t.Errorf("%s: TryAcquire(head %d): %v", name, order.Expected, head.Status)
				return false
			}
			continue // off is still not submitted
		}
		if err != nil {
			o.t.Errorf("%s: TryAcquire(%d): %v", name, off, err)
			return false
		}
		switch res.Status {
		case worklease.Acquired:
			o.grants.Add(1)
			o.leases <- orchGrant{d, off, res.Token}
		case worklease.Enqueued:
			// The holder's Succeed or Fail will hint at it in turn.
		default: // a new offset can be neither in flight nor terminal
			o.t.Errorf("%s: TryAcquire(%d): %v", name, off, res.Status)
			return false
		}
		return true
	}
}

// work processes g, then every offset the hints lead to that nobody else
// has taken.
func (o *orchestrator) work(rng *rand.Rand, g orchGrant) {
	name := o.names[g.domain]
	for {
		log := &o.logs[g.domain] // ours until we release the lease
		// Each offset is granted once, in order, so its grant is the
		// domain's (offset+1)th: Token documents the fence as that count.
		if g.token.Fence() != uint64(g.offset)+1 {
			o.t.Errorf("%s: offset %d granted with fence %d", name, g.offset, g.token.Fence())
			return
		}
		log.order = append(log.order, g.offset)

		var next int64
		var hint bool
		for {
			log.attempts[g.offset]++
			if rng.IntN(3) > 0 {
				log.outcome[g.offset] = orchSucceeded // before Succeed: afterwards the log is not ours
				res, err := o.m.Succeed(name, g.token)
				if err != nil {
					o.t.Errorf("%s: Succeed(%d): %v", name, g.offset, err)
					return
				}
				next, hint = res.Next, res.Status == worklease.NextHint
				break
			}
			final := log.attempts[g.offset] > o.cfg.maxRetries
			if final {
				log.outcome[g.offset] = orchFailed
			}
			res, err := o.m.Fail(name, g.token, errors.New("attempt failed"))
			if err != nil {
				o.t.Errorf("%s: Fail(%d): %v", name, g.offset, err)
				return
			}
			if got := res.Status != worklease.RetryScheduled; got != final {
				o.t.Errorf("%s: Fail(%d) on attempt %d: %v with RetryCount %d", name, g.offset, log.attempts[g.offset], res.Status, res.RetryCount)
				return
			}
			if !final {
				if res.RetryCount != log.attempts[g.offset] {
					o.t.Errorf("%s: Fail(%d) on attempt %d: RetryCount %d", name, g.offset, log.attempts[g.offset], res.RetryCount)
					return
				}
				continue // retry at once: backoff is the orchestrator's business, and this one has none
			}
			next, hint = res.Next, res.Status == worklease.GiveUpNextHint
			break
		}
		if !hint {
			return
		}
		if next <= g.offset {
			o.t.Errorf("%s: hint %d after offset %d", name, next, g.offset)
			return
		}
		if rng.IntN(4) == 0 {
			// Linger between the release and following the hint, so
			// that producers often find the domain idle with a backlog.
			runtime.Gosched()
		}
		// Follow the hint. Only the head can be granted now, so either we
		// get it or a producer did (AlreadyAcquired, or AlreadyProcessed /
		// AlreadyFailed if it has been finished since); then it is theirs.
		res, err := o.m.TryAcquire(name, next)
		if err != nil {
			o.t.Errorf("%s: TryAcquire(hint %d): %v", name, next, err)
			return
		}
		switch res.Status {
		case worklease.Acquired:
			o.grants.Add(1)
			g = orchGrant{g.domain, next, res.Token}
		case worklease.AlreadyAcquired, worklease.AlreadyProcessed, worklease.AlreadyFailed:
			o.collide.Add(1)
			return
		default:
			o.t.Errorf("%s: TryAcquire(hint %d): %v", name, next, res.Status)
			return
		}
	}
}

// observe calls CheckInvariants and Inspect until done is closed, checking
// what must hold at every instant: offsets finish in order, so a domain's
// terminal offsets are always 0..n-1, and what follows (the lease, then the
// backlog) is a run of consecutive offsets after them.
func (o *orchestrator) observe(rng *rand.Rand, done <-chan struct{}) {
	seen := make([]int64, o.cfg.domains) // terminal count last seen per domain; never decreases
	for {
		select {
		case <-done:
			return
		default:
		}
		if err := worklease.CheckInvariants(o.m); err != nil {
			o.t.Errorf("CheckInvariants during traffic: %v", err)
			return
		}
		for range 8 {
			d := rng.IntN(o.cfg.domains)
			name := o.names[d]
			info, err := o.m.Inspect(name)
			if err != nil {
				o.t.Errorf("Inspect(%s): %v", name, err)
				return
			}
			n := info.Processed + info.Failed
			if n < seen[d] || n > int64(o.cfg.offsets) {
				o.t.Errorf("%s: %d terminal offsets after %d", name, n, seen[d])
				return
			}
			seen[d] = n
			next := n
			if info.Leased {
				l := info.Lease
				if l.Offset != next || l.Token.Fence() != uint64(l.Offset)+1 || l.RetryCount > o.cfg.maxRetries {
					o.t.Errorf("%s: lease %+v after %d terminal offsets", name, l, n)
					return
				}
				next++
			}
			for i, off := range info.Backlog {
				if off != next+int64(i) {
					o.t.Errorf("%s: backlog %v after %d terminal offsets (leased %t)", name, info.Backlog, n, info.Leased)
					return
				}
			}
			processed, failed := worklease.Terminal(o.m, name)
			terminal := slices.Sorted(slices.Values(append(processed, failed...)))
			for i, off := range terminal {
				if off != int64(i) {
					o.t.Errorf("%s: terminal offsets %v are not 0..%d", name, terminal, len(terminal)-1)
					return
				}
			}
		}
		runtime.Gosched()
	}
}

// TestConcurrentStatsWithForget checks that Stats never goes backwards and
// ends exact while domains are worked on and forgotten, which moves their
// counts from the domain to its shard.
func TestConcurrentStatsWithForget(t *testing.T) {
	m, err := worklease.New(worklease.WithShards(2)) // few shards: forgets and Stats meet often
	require.NoError(t, err)
	const workers, rounds = 4, 200
	var done atomic.Bool
	var wg sync.WaitGroup
	var backwards atomic.Value // a message
	wg.Go(func() {
		var last worklease.Stats
		for !done.Load() {
			s := m.Stats()
			if s.Acquired < last.Acquired || s.Processed < last.Processed || s.Forgotten < last.Forgotten {
				backwards.Store(fmt.Sprintf("Stats went from %+v to %+v", last, s))
			}
			last = s
		}
	})
	errs := concAll(workers, func(w int) error {
		for i := range rounds {
			d := fmt.Sprintf("w%d-%d", w, i%3) // the same few domains, forgotten and back
			cycle(m, d, 0)
			if err := m.Forget(d); err != nil {
				return err
			}
		}
		return nil
	})
	done.Store(true)
	for _, err := range errs {
		require.NoError(t, err)
	}
	wg.Wait()
	require.Nil(t, backwards.Load())
	s := m.Stats()
	require.Equal(t, uint64(workers*rounds), s.Acquired)
	require.Equal(t, uint64(workers*rounds), s.Processed)
	require.Equal(t, uint64(workers*rounds), s.Forgotten)
}

// TestConcurrentForgetRacesWork forgets a domain over and over while it is
// worked on: a Forget that finds it idle drops its record just as the next
// TryAcquire looks it up, which must then see the record dropped and make a
// new one, never grant on the dropped one.
func TestConcurrentForgetRacesWork(t *testing.T) {
	m, err := worklease.New(worklease.WithShards(1))
	require.NoError(t, err)
	// At least n cycles, and on until a Forget has met the work: on a busy
	// machine the forgetting goroutine may get its first turn late.
	const n, most = 20_000, 2_000_000
	var done atomic.Bool
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		for !done.Load() {
			_ = m.Forget("d") // ErrDomainBusy while a lease is out: fine
		}
	})
	<-started
	var cycles int64
	for ; cycles < n || (cycles < most && m.Stats().Forgotten == 0); cycles++ {
		res, err := m.TryAcquire("d", cycles)
		require.NoError(t, err)
		require.Equal(t, worklease.Acquired, res.Status)
		_, err = m.Succeed("d", res.Token) // fails if the grant went to a dropped record
		require.NoError(t, err, "grant %d", cycles)
	}
	done.Store(true)
	wg.Wait()
	require.NoError(t, worklease.CheckInvariants(m))
	s := m.Stats()
	require.Equal(t, uint64(cycles), s.Acquired)
	require.Equal(t, uint64(cycles), s.Processed)
	require.NotZero(t, s.Forgotten, "no Forget met the work in %d cycles", cycles)
}
