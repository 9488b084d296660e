package pg_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// pullModel is what a stress test of the pull queue knows of its domains,
// to check every grant against: with no TTL and no call that revokes a
// lease, a domain is granted again only after its holder began to end its
// lease, under a higher fence, and offsets are granted in the order they
// were enqueued (a retried offset again, next), each with its payload, and
// succeed exactly once.
type pullModel struct {
	mu         sync.Mutex
	holder     map[string]*modelHolder
	lastFence  map[string]uint64
	lastOff    map[string]int64  // the last offset granted for the first time
	retried    map[string]int64  // the offset Retry sent back, to be granted next
	attempts   map[modelKey]int  // grants of each offset so far
	done       map[modelKey]bool // offsets whose Succeed returned nil
	enqueued   map[string]int64  // offsets [0, enqueued) of each domain are stored, or being stored
	stored     map[string]int64  // offsets [0, stored) of each domain are stored
	nDone      atomic.Int64
	grants     atomic.Int64
	byHow      map[string]int // grants by the call that made them
	failed     atomic.Bool
	violations []string
}

type modelKey struct {
	domain string
	off    int64
}

type modelHolder struct {
	fence  uint64
	off    int64
	ending bool // its holder has begun the call that ends it
	active bool
}

func newPullModel() *pullModel {
	return &pullModel{holder: map[string]*modelHolder{}, lastFence: map[string]uint64{}, lastOff: map[string]int64{},
		retried: map[string]int64{}, attempts: map[modelKey]int{}, done: map[modelKey]bool{}, enqueued: map[string]int64{},
		stored: map[string]int64{}, byHow: map[string]int{}}
}

// violate records a broken invariant; the caller holds mu.
func (md *pullModel) violate(format string, args ...any) {
	md.violations = append(md.violations, fmt.Sprintf(format, args...))
	md.failed.Store(true)
}

func (md *pullModel) fail(format string, args ...any) {
	md.mu.Lock()
	defer md.mu.Unlock()
	md.violate(format, args...)
}

// granted checks a lease that a call (how) granted; the caller holds mu.
func (md *pullModel) granted(how string, c worklease.Claim) {
	md.grants.Add(1)
	md.byHow[how]++
	d, k, f := c.Domain, modelKey{c.Domain, c.Offset}, c.Token.Fence()
	if h := md.holder[d]; h != nil && h.active && !h.ending {
		md.violate("%s granted %s/%d under fence %d while the holder of fence %d (offset %d) still held it", how, d, c.Offset, f, h.fence, h.off)
	}
	if f <= md.lastFence[d] {
		md.violate("%s granted %s/%d under fence %d, not above the last grant's %d", how, d, c.Offset, f, md.lastFence[d])
	}
	if want := string(pullPayload(d, c.Offset)); string(c.Payload) != want && how != "TryAcquire" {
		md.violate("%s granted %s/%d with payload %q; want %q", how, d, c.Offset, c.Payload, want)
	}
	if md.done[k] {
		md.violate("%s granted %s/%d, which succeeded already", how, d, c.Offset)
	}
	if r, ok := md.retried[d]; ok {
		if c.Offset != r {
			md.violate("%s granted %s/%d; want the retried offset %d first", how, d, c.Offset, r)
		}
		delete(md.retried, d)
	} else {
		last, ok := md.lastOff[d]
		if ok && c.Offset <= last {
			md.violate("%s granted %s/%d after offset %d: out of order", how, d, c.Offset, last)
		}
		if c.Offset >= md.enqueued[d] {
			md.violate("%s granted %s/%d, beyond what was enqueued", how, d, c.Offset)
		}
		md.lastOff[d] = c.Offset
	}
	md.attempts[k]++
	if c.Attempt != md.attempts[k] {
		md.violate("%s granted %s/%d as attempt %d; want %d", how, d, c.Offset, c.Attempt, md.attempts[k])
	}
	md.lastFence[d] = f
	md.holder[d] = &modelHolder{fence: f, off: c.Offset, active: true}
}

// ending records that the holder of c begins the call that ends it.
func (md *pullModel) ending(how string, cs ...worklease.Claim) {
	md.mu.Lock()
	defer md.mu.Unlock()
	for _, c := range cs {
		h := md.holder[c.Domain]
		if h == nil || h.fence != c.Token.Fence() || !h.active || h.ending {
			md.violate("%s of %s/%d (fence %d): the model has %+v as its holder", how, c.Domain, c.Offset, c.Token.Fence(), h)
			continue
		}
		h.ending = true
		if how == "Retry" {
			// The retried offset may be granted again before Retry returns.
			md.retried[c.Domain] = c.Offset
		}
	}
}

// ended records the outcome of the call that ended c's lease; the caller
// holds mu.
func (md *pullModel) ended(how string, c worklease.Claim, err error, retried bool) {
	if err != nil {
		md.violate("%s of %s/%d (fence %d), whose lease nothing revoked: %v", how, c.Domain, c.Offset, c.Token.Fence(), err)
		return
	}
	if h := md.holder[c.Domain]; h != nil && h.fence == c.Token.Fence() {
		h.active = false
	}
	k := modelKey{c.Domain, c.Offset}
	if retried {
		return // ending recorded the offset to grant next
	}
	if md.done[k] {
		md.violate("%s of %s/%d succeeded a second time", how, c.Domain, c.Offset)
	}
	md.done[k] = true
	md.nDone.Add(1)
}

// TestPullStress runs the pull queue's calls side by side on a few domains
// and checks every grant against the model: one producer stores each
// domain's offsets in order with EnqueueMany (batches across domains in
// random orders, with items given twice and items already stored, queued,
// leased or done) and Enqueue; workers claim with Claim and TryAcquire, and
// end their leases with Succeed, SucceedMany, ClaimNext (working what it
// grants next) and Retry (with a delay of the fake clock, which a ticker
// moves on); an operator pauses and resumes domains; and a checker reads
// checkRows throughout. With no TTL nothing revokes a lease: every ending
// call must succeed, and no call may fail (a deadlock would).
//
// WORKLEASE_STRESS=domains,offsets,workers sizes it (default 4,600,8).
// Known failure, rare (a few runs in a hundred with -race): a deadlock
// (40P01) between Claim, whose FOR UPDATE SKIP LOCKED can still wait when
// it follows a row's update chain, and an ordered batch.
func TestPullStress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	nDomains, perDomain, nWorkers := 4, 600, 8
	if s := os.Getenv("WORKLEASE_STRESS"); s != "" { // domains,offsets,workers
		if _, err := fmt.Sscanf(s, "%d,%d,%d", &nDomains, &perDomain, &nWorkers); err != nil {
			t.Fatal(err)
		}
	}
	e := newPullEnv(t, worklease.WithMaxRetries(1_000_000))
	m, ctx := e.m, e.ctx
	md := newPullModel()
	total := int64(nDomains * perDomain)
	deadline := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	running := func() bool {
		return !md.failed.Load() && md.nDone.Load() < total && time.Now().Before(deadline)
	}

	// The producer.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(7, 1))
		next := make([]int64, nDomains)
		for left := total; left > 0 && running(); {
			var items []pg.Item
			var fresh []bool // whether each item is the first of a new offset
			perm := rng.Perm(nDomains)[:1+rng.IntN(min(4, nDomains))]
			for _, d := range perm {
				for range 1 + rng.IntN(4) {
					if next[d] == int64(perDomain) {
						break
					}
					dom := domainName(d)
					items = append(items, pg.Item{Domain: dom, Offset: next[d], Payload: pullPayload(dom, next[d])})
					fresh = append(fresh, true)
					next[d]++
					left--
				}
			}
			// Items given twice, and items stored before, with their payloads.
			for range rng.IntN(3) {
				if len(items) > 0 {
					it := items[rng.IntN(len(items))] // with its payload: another would refuse the batch
					items = append(items, it)
					fresh = append(fresh, false)
				}
				if d := rng.IntN(nDomains); next[d] > 0 {
					o := rng.Int64N(next[d])
					if !contains(items, domainName(d), o) {
						items = append(items, pg.Item{Domain: domainName(d), Offset: o, Payload: pullPayload(domainName(d), o)})
						fresh = append(fresh, false)
					}
				}
			}
			if len(items) == 0 {
				continue
			}
			md.mu.Lock()
			before := make([]bool, len(items))
			for i, it := range items {
				before[i] = md.done[modelKey{it.Domain, it.Offset}]
			}
			for i, it := range items {
				if fresh[i] {
					md.enqueued[it.Domain] = max(md.enqueued[it.Domain], it.Offset+1)
				}
			}
			md.mu.Unlock()
			var sts []worklease.AcquireStatus
			var err error
			if len(items) == 1 && rng.IntN(2) == 0 {
				var st worklease.AcquireStatus
				st, err = m.Enqueue(ctx, items[0].Domain, items[0].Offset, items[0].Payload)
				sts = []worklease.AcquireStatus{st}
			} else {
				sts, err = m.EnqueueMany(ctx, items)
			}
			if err != nil {
				md.fail("EnqueueMany(%v): %v", items, err)
				return
			}
			md.mu.Lock()
			for i, it := range items {
				if fresh[i] {
					md.stored[it.Domain] = max(md.stored[it.Domain], it.Offset+1)
				}
			}
			md.mu.Unlock()
			for i, it := range items {
				switch {
				case fresh[i] && sts[i] != worklease.Enqueued:
					md.fail("EnqueueMany: new offset %s/%d answered %v; want Enqueued", it.Domain, it.Offset, sts[i])
				case before[i] && sts[i] != worklease.AlreadyProcessed:
					md.fail("EnqueueMany: offset %s/%d, done before the call, answered %v; want AlreadyProcessed", it.Domain, it.Offset, sts[i])
				case sts[i] == worklease.AlreadyFailed:
					md.fail("EnqueueMany: offset %s/%d answered AlreadyFailed", it.Domain, it.Offset)
				}
			}
			if rng.IntN(4) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})

	// The workers.
	for w := range nWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			var next []worklease.Claim
			for running() {
				claims := next
				next = nil
				if len(claims) == 0 && rng.IntN(10) == 0 {
					// TryAcquire the next offset of a domain: granted only if it
					// is its head and the domain is idle and running.
					d := domainName(rng.IntN(nDomains))
					md.mu.Lock()
					o, ok := md.retried[d]
					if !ok {
						o = md.lastOff[d] + 1
						if _, seen := md.lastOff[d]; !seen {
							o = 0
						}
					}
					stored := o < md.stored[d] // TryAcquire grants an offset never stored, too
					md.mu.Unlock()
					if stored {
						res, err := m.TryAcquire(ctx, d, o)
						var order *worklease.BacklogOrderError
						switch {
						case errors.As(err, &order):
						case err != nil:
							md.fail("TryAcquire(%s, %d): %v", d, o, err)
							return
						case res.Status == worklease.Acquired:
							c := worklease.Claim{Domain: d, Offset: o, Token: res.Token, Attempt: res.RetryCount + 1}
							md.mu.Lock()
							md.granted("TryAcquire", c)
							md.mu.Unlock()
							claims = append(claims, c)
						}
					}
				}
				if len(claims) == 0 {
					cs, err := m.Claim(ctx, 1+rng.IntN(3))
					if err != nil {
						md.fail("Claim: %v", err)
						return
					}
					md.mu.Lock()
					for _, c := range cs {
						md.granted("Claim", c)
					}
					md.mu.Unlock()
					claims = cs
				}
				if len(claims) == 0 {
					time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Microsecond)
					continue
				}
				var batch []worklease.Claim
				for _, c := range claims {
					switch r := rng.IntN(100); {
					case r < 8:
						md.ending("Retry", c)
						delay := time.Duration(rng.IntN(2)) * time.Millisecond
						res, err := m.Retry(ctx, c.Domain, c.Token, errors.New("again"), delay)
						if err == nil && res.DeadLettered {
							err = errors.New("dead-lettered")
						}
						md.mu.Lock()
						md.ended("Retry", c, err, true)
						md.mu.Unlock()
					case r < 25:
						md.ending("Succeed", c)
						_, err := m.Succeed(ctx, c.Domain, c.Token)
						md.mu.Lock()
						md.ended("Succeed", c, err, false)
						md.mu.Unlock()
					default:
						batch = append(batch, c)
					}
				}
				if len(batch) == 0 {
					continue
				}
				// Shuffle the batch, so that batches lock their domains in
				// an order of their own.
				rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
				how := "SucceedMany"
				if rng.IntN(2) == 0 {
					how = "ClaimNext"
				}
				md.ending(how, batch...)
				var errs []error
				var err error
				if how == "ClaimNext" {
					next, errs, err = m.ClaimNext(ctx, batch)
				} else {
					errs, err = m.SucceedMany(ctx, batch)
				}
				if err != nil {
					md.fail("%s: %v", how, err)
					return
				}
				md.mu.Lock()
				for i, c := range batch {
					md.ended(how, c, errs[i], false)
				}
				for _, c := range next {
					md.granted("ClaimNext", c)
				}
				md.mu.Unlock()
			}
		})
	}

	// The operator pauses a domain now and then, and resumes it.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 3))
		for running() {
			d := domainName(rng.IntN(nDomains))
			if err := m.Pause(ctx, d); err != nil {
				md.fail("Pause(%s): %v", d, err)
				return
			}
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			if _, err := m.Resume(ctx, d); err != nil {
				md.fail("Resume(%s): %v", d, err)
				return
			}
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
	})

	// The clock ticks, ending retry delays; the checker checks the rows.
	wg.Go(func() {
		for running() {
			e.clock.Advance(time.Millisecond)
			time.Sleep(time.Millisecond)
		}
	})
	wg.Go(func() {
		for running() {
			if err := checkRows(ctx, e.pool, e.schema); err != nil {
				md.fail("checkRows during the run: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	wg.Wait()

	md.mu.Lock()
	defer md.mu.Unlock()
	for i, v := range md.violations {
		if i == 20 {
			t.Errorf("... and %d more", len(md.violations)-20)
			break
		}
		t.Error(v)
	}
	if t.Failed() {
		return
	}
	if n := md.nDone.Load(); n != total {
		var missing []string
		for d := range nDomains {
			for o := range int64(perDomain) {
				if !md.done[modelKey{domainName(d), o}] {
					missing = append(missing, fmt.Sprintf("%s/%d", domainName(d), o))
				}
			}
		}
		sort.Strings(missing)
		if len(missing) > 20 {
			missing = missing[:20]
		}
		t.Fatalf("%d of %d offsets succeeded within the time; missing, among others: %v", n, total, missing)
	}
	for d := range nDomains {
		info, err := m.Inspect(ctx, domainName(d))
		if err != nil || len(info.Backlog) != 0 || info.Leased {
			t.Errorf("%s at the end: %+v, %v; want idle with nothing queued", domainName(d), info, err)
		}
	}
	if n := e.count("payloads"); n != 0 {
		t.Errorf("%d payloads left after every offset succeeded", n)
	}
	if n := e.count("dead_letters"); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	t.Logf("%d grants for %d offsets: %v", md.grants.Load(), total, md.byHow)
}

func contains(items []pg.Item, domain string, off int64) bool {
	for _, it := range items {
		if it.Domain == domain && it.Offset == off {
			return true
		}
	}
	return false
}

// revokeModel is what TestPullStressRevocations knows: each domain's grants
// and each offset's success, with the sequence number of the moment each
// was known (a call's start or return).
type revokeModel struct {
	mu         sync.Mutex
	seq        int64
	grants     map[string][]revokeGrant // by domain
	maxFence   map[string]revokeFence   // each domain's highest fence granted, and when it was known
	succeeded  map[modelKey]int64       // when each offset's success was known
	redriven   map[modelKey]bool
	violations []string
	failed     atomic.Bool
}

type revokeGrant struct {
	off   int64
	fence uint64
}

type revokeFence struct {
	fence uint64
	at    int64
}

func (md *revokeModel) now() int64 {
	md.mu.Lock()
	defer md.mu.Unlock()
	md.seq++
	return md.seq
}

func (md *revokeModel) violate(format string, args ...any) {
	md.mu.Lock()
	defer md.mu.Unlock()
	md.violations = append(md.violations, fmt.Sprintf(format, args...))
	md.failed.Store(true)
}

// granted records leases a call that started at start granted.
func (md *revokeModel) granted(how string, start int64, cs ...worklease.Claim) {
	md.mu.Lock()
	defer md.mu.Unlock()
	md.seq++
	for _, c := range cs {
		k := modelKey{c.Domain, c.Offset}
		if at, ok := md.succeeded[k]; ok && at < start {
			md.violations = append(md.violations, fmt.Sprintf("%s granted %s/%d (fence %d), which had succeeded before the call began", how, c.Domain, c.Offset, c.Token.Fence()))
		}
		if want := string(pullPayload(c.Domain, c.Offset)); string(c.Payload) != want {
			md.violations = append(md.violations, fmt.Sprintf("%s granted %s/%d with payload %q; want %q", how, c.Domain, c.Offset, c.Payload, want))
		}
		md.grants[c.Domain] = append(md.grants[c.Domain], revokeGrant{c.Offset, c.Token.Fence()})
		if f := c.Token.Fence(); f > md.maxFence[c.Domain].fence {
			md.maxFence[c.Domain] = revokeFence{f, md.seq}
		}
	}
	if len(md.violations) > 0 {
		md.failed.Store(true)
	}
}

// ended records the outcome of a call, started at start, that ended c's
// lease as a success: lost says the lease was gone.
func (md *revokeModel) ended(how string, start int64, c worklease.Claim, err error) {
	md.mu.Lock()
	defer md.mu.Unlock()
	md.seq++
	switch {
	case err == nil:
		k := modelKey{c.Domain, c.Offset}
		if _, ok := md.succeeded[k]; ok {
			md.violations = append(md.violations, fmt.Sprintf("%s of %s/%d (fence %d): it succeeded a second time", how, c.Domain, c.Offset, c.Token.Fence()))
		}
		if m := md.maxFence[c.Domain]; m.fence > c.Token.Fence() && m.at < start {
			md.violations = append(md.violations, fmt.Sprintf("%s of %s/%d under fence %d succeeded, though fence %d had been granted before the call began", how, c.Domain, c.Offset, c.Token.Fence(), m.fence))
		}
		md.succeeded[k] = md.seq
	case !lost(err) && !errors.Is(err, worklease.ErrLeaseRevoked):
		md.violations = append(md.violations, fmt.Sprintf("%s of %s/%d: %v", how, c.Domain, c.Offset, err))
	}
	if len(md.violations) > 0 {
		md.failed.Store(true)
	}
}

// TestPullStressRevocations runs the pull queue's calls side by side with
// leases that expire (a ticker moves the fake clock on; some workers stall
// past the TTL) and operators that revoke them (ForceRelease, Kill of
// offsets in flight or queued, Redrive of dead letters, Pause and Resume),
// and checks what holds whatever happens: an offset succeeds at most once,
// and never after it succeeded; a holder's success is refused once a later
// fence of its domain was granted; each grant carries its offset's payload;
// offsets are first granted in the order they were enqueued (but those
// redriven); and once everything is redriven and worked, every offset
// succeeded exactly once and checkRows holds.
func TestPullStressRevocations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	const (
		nDomains  = 6
		perDomain = 150
		nWorkers  = 5
		ttl       = 40 * time.Millisecond
	)
	e := newPullEnv(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(1_000_000))
	m, ctx := e.m, e.ctx
	md := &revokeModel{grants: map[string][]revokeGrant{}, maxFence: map[string]revokeFence{},
		succeeded: map[modelKey]int64{}, redriven: map[modelKey]bool{}}
	total := nDomains * perDomain
	deadline := time.Now().Add(4 * time.Second) // then what is left is worked to the end
	var produced atomic.Bool
	running := func() bool { return !md.failed.Load() && (time.Now().Before(deadline) || !produced.Load()) }
	var wg sync.WaitGroup

	wg.Go(func() { // the producer
		defer produced.Store(true)
		rng := rand.New(rand.NewPCG(5, 5))
		next := make([]int64, nDomains)
		for left := total; left > 0 && running(); {
			var items []pg.Item
			for _, d := range rng.Perm(nDomains)[:1+rng.IntN(3)] {
				for range 1 + rng.IntN(4) {
					if next[d] < perDomain {
						items = append(items, pg.Item{Domain: domainName(d), Offset: next[d], Payload: pullPayload(domainName(d), next[d])})
						next[d]++
						left--
					}
				}
				if next[d] > 0 && rng.IntN(3) == 0 {
					o := rng.Int64N(next[d])
					if !contains(items, domainName(d), o) {
						items = append(items, pg.Item{Domain: domainName(d), Offset: o, Payload: pullPayload(domainName(d), o)})
					}
				}
			}
			if len(items) == 0 {
				continue
			}
			if _, err := m.EnqueueMany(ctx, items); err != nil {
				md.violate("EnqueueMany: %v", err)
				return
			}
			time.Sleep(time.Duration(rng.IntN(2)) * time.Millisecond)
		}
	})
	for w := range nWorkers {
		wg.Go(func() { // the workers
			rng := rand.New(rand.NewPCG(uint64(w), 77))
			var next []worklease.Claim
			for running() {
				claims := next
				next = nil
				if len(claims) == 0 {
					start := md.now()
					cs, err := m.Claim(ctx, 1+rng.IntN(3))
					if err != nil {
						md.violate("Claim: %v", err)
						return
					}
					md.granted("Claim", start, cs...)
					claims = cs
				}
				if len(claims) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				if rng.IntN(20) == 0 {
					time.Sleep(ttl + ttl/2) // stall: the leases expire
				}
				var batch []worklease.Claim
				for _, c := range claims {
					switch r := rng.IntN(100); {
					case r < 8:
						_, err := m.Retry(ctx, c.Domain, c.Token, errors.New("again"), 0)
						if err != nil && !lost(err) && !errors.Is(err, worklease.ErrLeaseRevoked) {
							md.violate("Retry of %s/%d: %v", c.Domain, c.Offset, err)
						}
					case r < 25:
						start := md.now()
						_, err := m.Succeed(ctx, c.Domain, c.Token)
						md.ended("Succeed", start, c, err)
					default:
						batch = append(batch, c)
					}
				}
				if len(batch) == 0 {
					continue
				}
				rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
				how := "SucceedMany"
				if rng.IntN(2) == 0 {
					how = "ClaimNext"
				}
				start := md.now()
				var errs []error
				var err error
				if how == "ClaimNext" {
					next, errs, err = m.ClaimNext(ctx, batch)
				} else {
					errs, err = m.SucceedMany(ctx, batch)
				}
				if err != nil {
					md.violate("%s: %v", how, err)
					return
				}
				for i, c := range batch {
					md.ended(how, start, c, errs[i])
				}
				md.granted("ClaimNext", start, next...)
			}
		})
	}
	wg.Go(func() { // the operator
		rng := rand.New(rand.NewPCG(9, 9))
		for running() {
			d := domainName(rng.IntN(nDomains))
			var err error
			switch r := rng.IntN(100); {
			case r < 25:
				_, err = m.ForceRelease(ctx, d)
				if errors.Is(err, worklease.ErrNoLease) {
					err = nil
				}
			case r < 45:
				info, ierr := m.Inspect(ctx, d)
				if err = ierr; err == nil {
					var offs []int64
					if info.Leased {
						offs = append(offs, info.Lease.Offset)
					}
					offs = append(offs, info.Backlog...)
					if len(offs) > 0 {
						_, err = m.Kill(ctx, d, offs[rng.IntN(len(offs))], "killed")
						if errors.Is(err, worklease.ErrAlreadyProcessed) {
							err = nil
						}
					}
				}
			case r < 75:
				letters, lerr := m.DeadLetters(ctx, d)
				if err = lerr; err == nil && len(letters) > 0 {
					l := letters[rng.IntN(len(letters))]
					md.mu.Lock()
					md.redriven[modelKey{d, l.Offset}] = true
					md.mu.Unlock()
					_, err = m.Redrive(ctx, d, l.Offset)
				}
			case r < 88:
				err = m.Pause(ctx, d)
			default:
				_, err = m.Resume(ctx, d)
			}
			if err != nil {
				md.violate("operator on %s: %v", d, err)
				return
			}
			time.Sleep(time.Duration(1+rng.IntN(4)) * time.Millisecond)
		}
	})
	wg.Go(func() { // the clock and the checker
		for i := 0; running(); i++ {
			e.clock.Advance(time.Millisecond)
			time.Sleep(time.Millisecond)
			if i%20 == 0 {
				if err := checkRows(ctx, e.pool, e.schema); err != nil {
					md.violate("checkRows during the run: %v", err)
				}
			}
		}
	})
	wg.Wait()
	if !md.failed.Load() {
		// Finish: every domain resumed, every dead letter redriven, every
		// lease left to expire, and the rest worked by Claim and Succeed.
		e.clock.Advance(time.Hour)
		for round := 0; ; round++ {
			if round == 2000 {
				md.violate("the work is not finished after %d rounds", round)
				break
			}
			for d := range nDomains {
				if _, err := m.Resume(ctx, domainName(d)); err != nil {
					t.Fatal(err)
				}
			}
			letters, err := m.DeadLetters(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range letters {
				md.mu.Lock()
				md.redriven[modelKey{l.Domain, l.Offset}] = true
				md.mu.Unlock()
				if _, err := m.Redrive(ctx, l.Domain, l.Offset); err != nil {
					t.Fatal(err)
				}
			}
			start := md.now()
			cs, err := m.Claim(ctx, nDomains)
			if err != nil {
				t.Fatal(err)
			}
			md.granted("Claim", start, cs...)
			if len(cs) == 0 && len(letters) == 0 {
				break
			}
			for _, c := range cs {
				start := md.now()
				_, err := m.Succeed(ctx, c.Domain, c.Token)
				md.ended("Succeed", start, c, err)
			}
		}
	}

	md.mu.Lock()
	defer md.mu.Unlock()
	for i, v := range md.violations {
		if i == 20 {
			t.Errorf("... and %d more", len(md.violations)-20)
			break
		}
		t.Error(v)
	}
	if t.Failed() {
		return
	}
	for d := range nDomains {
		dom := domainName(d)
		for o := range int64(perDomain) {
			if _, ok := md.succeeded[modelKey{dom, o}]; !ok {
				t.Errorf("%s/%d never succeeded", dom, o)
			}
		}
		// Each offset's first grant, by fence, in the order enqueued.
		gs := md.grants[dom]
		sort.Slice(gs, func(i, j int) bool { return gs[i].fence < gs[j].fence })
		seen := map[int64]bool{}
		last := int64(-1)
		for i, g := range gs {
			if i > 0 && g.fence == gs[i-1].fence {
				t.Errorf("%s: fence %d granted twice", dom, g.fence)
			}
			if seen[g.off] || md.redriven[modelKey{dom, g.off}] {
				continue
			}
			seen[g.off] = true
			if g.off < last {
				t.Errorf("%s: offset %d first granted (fence %d) after offset %d", dom, g.off, g.fence, last)
			}
			last = g.off
		}
	}
	if n := e.count("payloads"); n != 0 {
		t.Errorf("%d payloads left after every offset succeeded", n)
	}
	t.Logf("%d offsets, %d redriven", total, len(md.redriven))
}
