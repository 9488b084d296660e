package worklease_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/worklease/worklease"
)

// mustNew returns a Manager or fails the benchmark.
func mustNew(b *testing.B, opts ...worklease.Option) *worklease.Manager {
	b.Helper()
	m, err := worklease.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// cycle runs one TryAcquire (granted) + Succeed. It panics on an unexpected
// outcome: b.Fatal may not be called from RunParallel goroutines.
func cycle(m *worklease.Manager, domain string, offset int64) {
	res, err := m.TryAcquire(domain, offset)
	if err != nil || res.Status != worklease.Acquired {
		panic(fmt.Sprintf("TryAcquire(%q, %d) = %v, %v", domain, offset, res.Status, err))
	}
	if _, err := m.Succeed(domain, res.Token); err != nil {
		panic(err)
	}
}

func domainNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "domain-" + strconv.Itoa(i)
	}
	return names
}

// scatteredVisits splits names between p goroutines, each a contiguous
// block of its own so that no two goroutines share a domain, and returns
// each goroutine's block in a fixed pseudo-random order. That is what a
// service with many active tenants sees: each tenant's events arrive in no
// order that follows where its domain sits in memory. The names are fresh
// copies laid out in visiting order, as a key arrives in a buffer of its
// own, so that comparing it with the key a map holds reads both.
func scatteredVisits(names []string, p int) [][]string {
	visits := make([][]string, p)
	for g := range visits {
		block := names[g*len(names)/p : (g+1)*len(names)/p]
		rng := rand.New(rand.NewPCG(uint64(g), uint64(len(names))))
		visits[g] = make([]string, len(block))
		for i, j := range rng.Perm(len(block)) {
			visits[g][i] = strings.Clone(block[j])
		}
	}
	return visits
}

// visitLoop runs cycle over visit, pass after pass, until more reports that
// the benchmark is done. Every domain has finished offset 0 and, as each
// pass visits it once, runs offset p on pass p.
func visitLoop(visit []string, more func() bool, cycle func(domain string, offset int64)) {
	k, pass := 0, int64(1)
	for more() {
		cycle(visit[k], pass)
		if k++; k == len(visit) {
			k, pass = 0, pass+1
		}
	}
}

// cycleDomains are the domain counts of the scale curve: BenchmarkCycle,
// its floors and BenchmarkCycleParallel run at each.
var cycleDomains = []int{1, 1_000, 100_000, 1_000_000}

// BenchmarkCycle measures one granted TryAcquire plus Succeed on an existing
// domain, as an orchestrator does for every unit of work: one goroutine
// visits every domain once per pass, in scattered order (see
// scatteredVisits), and each visit runs the domain's next offset.
func BenchmarkCycle(b *testing.B) {
	for _, n := range cycleDomains {
		b.Run(fmt.Sprintf("domains=%d", n), func(b *testing.B) {
			m := mustNew(b)
			names := domainNames(n)
			for _, d := range names { // create every record up front
				cycle(m, d, 0)
			}
			visit := scatteredVisits(names, 1)[0]
			b.ReportAllocs()
			b.ResetTimer()
			visitLoop(visit, b.Loop, func(domain string, offset int64) { cycle(m, domain, offset) })
		})
	}
}

// BenchmarkCycleParallel runs cycles from GOMAXPROCS goroutines, each over
// every domain of its own share once per pass, in scattered order: with n
// domains, all n are visited.
func BenchmarkCycleParallel(b *testing.B) {
	for _, n := range cycleDomains[1:] {
		b.Run(fmt.Sprintf("domains=%d", n), func(b *testing.B) {
			m := mustNew(b)
			names := domainNames(n)
			for _, d := range names {
				cycle(m, d, 0)
			}
			benchmarkParallelCycles(b, names, func(domain string, offset int64) {
				cycle(m, domain, offset)
			})
		})
	}
}

// BenchmarkCycleParallelHotSet is BenchmarkCycleParallel on a hot set:
// 100,000 domains exist, and each goroutine cycles over 1,000 of its own,
// which stay in the processor's caches.
func BenchmarkCycleParallelHotSet(b *testing.B) {
	const n, hot = 100_000, 1_000
	m := mustNew(b)
	names := domainNames(n)
	for _, d := range names {
		cycle(m, d, 0)
	}
	p := runtime.GOMAXPROCS(0)
	var set []string // each goroutine's hot domains, spread over the domains
	for g := range p {
		for i := range hot {
			set = append(set, names[(g*hot+i)*(n/(p*hot))])
		}
	}
	benchmarkParallelCycles(b, set, func(domain string, offset int64) {
		cycle(m, domain, offset)
	})
}

// BenchmarkFailRetry measures a Fail that schedules a retry.
func BenchmarkFailRetry(b *testing.B) {
	m := mustNew(b, worklease.WithMaxRetries(math.MaxInt)) // retries never run out
	res, err := m.TryAcquire("A", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Fail("A", res.Token, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnqueueHandOff measures a domain under load: every offset is
// enqueued behind the one in flight, then handed off by following the hint.
func BenchmarkEnqueueHandOff(b *testing.B) {
	m := mustNew(b)
	res, err := m.TryAcquire("A", 0)
	if err != nil {
		b.Fatal(err)
	}
	tok := res.Token
	b.ReportAllocs()
	for i := int64(1); b.Loop(); i++ {
		if r, err := m.TryAcquire("A", i); err != nil || r.Status != worklease.Enqueued {
			b.Fatal(r.Status, err)
		}
		s, err := m.Succeed("A", tok)
		if err != nil || s.Next != i {
			b.Fatal(s, err)
		}
		r, err := m.TryAcquire("A", i)
		if err != nil {
			b.Fatal(err)
		}
		tok = r.Token
	}
}

// BenchmarkSucceedNext measures a busy domain's hand-off: an offset is
// enqueued behind the one in flight, which then finishes and hands the
// domain to the next, either in one SucceedNext or, as before it, with
// Succeed and a TryAcquire of the hinted head. Both run on the same
// domains, each of which always has one offset in flight and one queued.
func BenchmarkSucceedNext(b *testing.B) {
	impls := []struct {
		name string
		next func(m *worklease.Manager, domain string, tok worklease.Token) worklease.Token
	}{
		{"SucceedNext", func(m *worklease.Manager, domain string, tok worklease.Token) worklease.Token {
			s, err := m.SucceedNext(domain, tok)
			if err != nil || s.Status != worklease.NextAcquired {
				panic(fmt.Sprint(s.Status, err))
			}
			return s.Lease.Token
		}},
		{"Succeed+TryAcquire", func(m *worklease.Manager, domain string, tok worklease.Token) worklease.Token {
			s, err := m.Succeed(domain, tok)
			if err != nil || s.Status != worklease.NextHint {
				panic(fmt.Sprint(s.Status, err))
			}
			r, err := m.TryAcquire(domain, s.Next)
			if err != nil || r.Status != worklease.Acquired {
				panic(fmt.Sprint(r.Status, err))
			}
			return r.Token
		}},
	}
	for _, n := range []int{1, 1_000} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("domains=%d/impl=%s", n, impl.name), func(b *testing.B) {
				m := mustNew(b)
				names := domainNames(n)
				toks := make([]worklease.Token, n)
				next := make([]int64, n)
				for i, d := range names {
					res, err := m.TryAcquire(d, 0)
					if err != nil {
						b.Fatal(err)
					}
					toks[i], next[i] = res.Token, 1
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					d := i % n
					if r, err := m.TryAcquire(names[d], next[d]); err != nil || r.Status != worklease.Enqueued {
						b.Fatal(r.Status, err)
					}
					next[d]++
					toks[d] = impl.next(m, names[d], toks[d])
				}
			})
		}
	}
}

// BenchmarkStats measures Stats over 100,000 domains, which it visits one
// by one.
func BenchmarkStats(b *testing.B) {
	m := mustNew(b)
	for _, d := range domainNames(100_000) {
		cycle(m, d, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		if m.Stats().Processed != 100_000 {
			b.Fatal("Stats lost count")
		}
	}
}

// BenchmarkListDomains lists a page of 100 domains among 1,000,000, from
// a cursor in the middle: all of them, and those with dead letters when
// one domain in a hundred has some (a page then looks at 10,000 domains).
func BenchmarkListDomains(b *testing.B) {
	m := mustNew(b)
	const n = 1_000_000
	for i, d := range domainNames(n) {
		cycle(m, d, 0)
		if i%100 == 0 {
			if _, err := m.Kill(d, 1, "poison"); err != nil {
				b.Fatal(err)
			}
		}
	}
	// A cursor half way.
	q := worklease.DomainQuery{Limit: worklease.MaxPageLimit}
	for range n / 2 / worklease.MaxPageLimit {
		p, err := m.ListDomains(q)
		if err != nil {
			b.Fatal(err)
		}
		q.After = p.Next
	}
	for _, c := range []struct {
		name  string
		state worklease.DomainState
	}{{"all", 0}, {"dead-lettered", worklease.DomainDeadLettered}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := m.ListDomains(worklease.DomainQuery{State: c.state, After: q.After, Limit: 100})
				if err != nil || p.Next == "" {
					b.Fatal(err, len(p.Domains))
				}
			}
		})
	}
}

// BenchmarkListDeadLetters lists the first page of 100 dead letters among
// 100,000: those of 10,000 domains, ten each, among 100,000 domains, by
// domain and newest first, and those of one domain that has 100,000.
func BenchmarkListDeadLetters(b *testing.B) {
	m := mustNew(b)
	for i, d := range domainNames(100_000) {
		cycle(m, d, 0)
		if i%10 == 0 {
			for off := int64(1); off <= 10; off++ {
				if _, err := m.Kill(d, off, "poison"); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for off := range int64(100_000) {
		if _, err := m.Kill("one", off, "poison"); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		q    worklease.DeadLetterQuery
	}{
		{"by-domain", worklease.DeadLetterQuery{Limit: 100}},
		{"newest-first", worklease.DeadLetterQuery{Order: worklease.DeadLettersNewestFirst, Limit: 100}},
		{"one-domain", worklease.DeadLetterQuery{Domain: "one", Limit: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := m.ListDeadLetters(c.q)
				if err != nil || len(p.DeadLetters) != 100 {
					b.Fatal(err, len(p.DeadLetters))
				}
			}
		})
	}
}

// BenchmarkProduce measures the producers' calls on a Manager without a
// journal, over 1,000 domains in turn, each call storing a 100-byte
// payload: Enqueue of offsets the caller numbers, and Append, which the
// domain numbers, without a key and with a new key each call. The Manager
// is replaced, off the clock, every 100,000 calls, so that the backlogs
// stay small. make bench compares Append with Enqueue.
func BenchmarkProduce(b *testing.B) {
	for _, call := range produceCalls {
		b.Run("call="+call, func(b *testing.B) {
			benchProduce(b, call, func() *worklease.Manager { return mustNew(b) })
		})
	}
}

// produceCalls are the calls BenchmarkProduce makes.
var produceCalls = []string{"Enqueue", "Append", "AppendKey"}

// benchProduce makes call b.N times on Managers that open makes.
func benchProduce(b *testing.B, call string, open func() *worklease.Manager) {
	names := domainNames(1000)
	payload := make([]byte, 100)
	next := make([]int64, len(names))
	var key []byte
	m := open()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%100_000 == 0 {
			b.StopTimer()
			_ = m.Close()
			m, next = open(), make([]int64, len(names))
			b.StartTimer()
		}
		d := i % len(names)
		var err error
		switch call {
		case "Enqueue":
			var st worklease.AcquireStatus
			if st, err = m.Enqueue(names[d], next[d], payload); st != worklease.Enqueued && err == nil {
				err = fmt.Errorf("status %v", st)
			}
			next[d]++
		case "Append":
			_, err = m.Append(names[d], payload, worklease.AppendOptions{})
		case "AppendKey":
			key = strconv.AppendInt(key[:0], int64(i), 10)
			_, err = m.Append(names[d], payload, worklease.AppendOptions{Key: string(key)})
		}
		if err != nil {
			b.Fatalf("%s on %s: %v", call, names[d], err)
		}
	}
	b.StopTimer()
	_ = m.Close()
}

// BenchmarkAppendKeys reports what Append's idempotency keys cost in
// memory: the heap that 100,000 Appends with 16-byte keys on one domain
// take beyond the same Appends without keys, per key, the key's own bytes
// included. The metric is the point, not ns/op.
func BenchmarkAppendKeys(b *testing.B) {
	const n = 100_000
	appends := func(keyed bool) uint64 {
		m := mustNew(b)
		defer m.Close()
		if _, err := m.Append("d", nil, worklease.AppendOptions{}); err != nil { // the domain exists before measuring
			b.Fatal(err)
		}
		return heapAfter(func() {
			for i := range n {
				var opts worklease.AppendOptions
				if keyed {
					opts.Key = fmt.Sprintf("key-%012d", i)
				}
				if _, err := m.Append("d", nil, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	var perKey float64
	for b.Loop() {
		perKey = float64(int64(appends(true))-int64(appends(false))) / n
	}
	b.ReportMetric(perKey, "bytes/key")
}
