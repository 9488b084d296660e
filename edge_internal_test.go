package worklease

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease/internal/clock"
)

var rv1Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEdgeZeroAndNilManager(t *testing.T) {
	for name, m := range map[string]*Manager{"zero": {}, "nil": nil} {
		tok := Token{}
		check := func(op string, err error) {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s %s: err %v, want ErrClosed", name, op, err)
			}
		}
		_, err := m.TryAcquire("d", 0)
		check("TryAcquire", err)
		_, err = m.Succeed("d", tok)
		check("Succeed", err)
		_, err = m.SucceedNext("d", tok)
		check("SucceedNext", err)
		_, err = m.Fail("d", tok, errors.New("x"))
		check("Fail", err)
		_, err = m.FailNext("d", tok, nil)
		check("FailNext", err)
		_, err = m.Extend("d", tok, time.Second)
		check("Extend", err)
		_, err = m.Extend("d", tok, 0)
		check("Extend0", err)
		_, err = m.Inspect("d")
		check("Inspect", err)
		_, err = m.Leases()
		check("Leases", err)
		_, err = m.Domains()
		check("Domains", err)
		_, err = m.DeadLetters("")
		check("DeadLetters", err)
		_, err = m.Kill("d", 0, "r")
		check("Kill", err)
		_, err = m.Redrive("d", 0)
		check("Redrive", err)
		_, err = m.ForceRelease("d")
		check("ForceRelease", err)
		check("Pause", m.Pause("d"))
		_, err = m.Resume("d")
		check("Resume", err)
		check("Forget", m.Forget("d"))
		_, err = m.Reap()
		check("Reap", err)
		check("Snapshot", m.Snapshot())
		check("Close", m.Close())
		if s := m.Stats(); s != (Stats{}) {
			t.Errorf("%s Stats %+v", name, s)
		}
	}
}

func TestEdgeStatsWrap(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := m.TryAcquire("d", 0)
	_, r := m.lockRecord("d", false)
	r.counts[0] = math.MaxUint32
	r.counts[2] = math.MaxUint32 - 1
	r.mu.Unlock()
	if _, err := m.Succeed("d", res.Token); err != nil {
		t.Fatal(err)
	}
	res, _ = m.TryAcquire("d", 1)
	m.Succeed("d", res.Token)
	s := m.Stats()
	if s.Acquired != 1<<32 || s.Processed != 1<<32 {
		t.Fatalf("stats %+v", s)
	}
	if err := m.Forget("d"); err != nil {
		t.Fatal(err)
	}
	s = m.Stats()
	if s.Acquired != 1<<32 || s.Processed != 1<<32 || s.Forgotten != 1 {
		t.Fatalf("after forget stats %+v", s)
	}
}

func TestEdgeKeys(t *testing.T) {
	m, _ := New()
	keys := []string{"\xff\xfe", string(make([]byte, 28)), string(make([]byte, 29)), "abcdefghijklmnopqrstuvwxyz01", "abcdefghijklmnopqrstuvwxyz012", string(make([]byte, MaxDomainLen))}
	for _, k := range keys {
		buf := []byte(k)
		res, err := m.TryAcquire(string(buf), 5)
		if err != nil || res.Status != Acquired {
			t.Fatalf("%q: %v %v", k, res, err)
		}
	}
	for _, k := range keys {
		res, err := m.TryAcquire(k, 5)
		if err != nil || res.Status != AlreadyAcquired {
			t.Fatalf("%q: %v %v", k, res, err)
		}
	}
	d, _ := m.Domains()
	if len(d) != len(keys) {
		t.Fatalf("domains %d", len(d))
	}
	if _, err := m.TryAcquire(string(make([]byte, MaxDomainLen+1)), 0); !errors.Is(err, ErrInvalidDomain) {
		t.Fatal(err)
	}
	if err := CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
}

func rv1Cold(m *Manager, d string) *domainCold {
	_, r := m.lockRecord(d, false)
	defer r.mu.Unlock()
	return r.state.cold
}

func TestEdgeColdTrim(t *testing.T) {
	fc := clock.NewFake(rv1Epoch)
	m, _ := New(WithClock(fc), WithLeaseTTL(time.Second), WithMaxRetries(1))
	// kill a queued offset then redrive it and finish it
	a, _ := m.TryAcquire("d", 0)
	m.TryAcquire("d", 1)
	m.Kill("d", 1, "x")
	m.Redrive("d", 1)
	r, err := m.SucceedNext("d", a.Token)
	if err != nil || r.Status != NextAcquired {
		t.Fatal(r, err)
	}
	if _, err := m.Succeed("d", r.Lease.Token); err != nil {
		t.Fatal(err)
	}
	if c := rv1Cold(m, "d"); c != nil {
		t.Errorf("cold kept: %+v", c)
	}
	if err := CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
}

func TestEdgeStatsExactUnderForget(t *testing.T) {
	m, _ := New(WithShards(1))
	var acquired, processed, enq, forgotten [8]uint64
	done := make(chan struct{})
	var stop = make(chan struct{})
	domains := []string{"a", "b", "abcdefghijklmnopqrstuvwxyz0123456789"}
	for g := 0; g < 4; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := domains[i%len(domains)]
				res, err := m.TryAcquire(d, int64(i))
				if err != nil {
					var boe *BacklogOrderError
					if errors.As(err, &boe) {
						res, err = m.TryAcquire(d, boe.Expected)
					}
					if err != nil {
						continue
					}
				}
				switch res.Status {
				case Acquired:
					acquired[g]++
					sr, err := m.SucceedNext(d, res.Token)
					if err != nil {
						t.Error(err)
						return
					}
					processed[g]++
					for sr.Status == NextAcquired {
						acquired[g]++
						sr, err = m.SucceedNext(d, sr.Lease.Token)
						if err != nil {
							t.Error(err)
							return
						}
						processed[g]++
					}
				case Enqueued:
					enq[g]++
				}
			}
		}(g)
	}
	go func() {
		defer func() { done <- struct{}{} }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if m.Forget(domains[i%len(domains)]) == nil {
				forgotten[7]++
			}
			_ = m.Stats()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	for range 5 {
		<-done
	}
	var a, p uint64
	for g := range 8 {
		a += acquired[g]
		p += processed[g]
	}
	s := m.Stats()
	if s.Acquired != a || s.Processed != p {
		t.Fatalf("stats %+v; counted acquired %d processed %d", s, a, p)
	}
	if err := CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
}

func TestEdgeInputOrder(t *testing.T) {
	long := string(make([]byte, MaxDomainLen+1))
	for _, mono := range []bool{false, true} {
		var opts []Option
		if mono {
			opts = append(opts, WithMonotonicOffsets())
		}
		m, _ := New(opts...)
		want := func(op string, err, target error) {
			t.Helper()
			if !errors.Is(err, target) {
				t.Errorf("mono=%v %s: %v, want %v", mono, op, err, target)
			}
		}
		_, err := m.TryAcquire(long, -1)
		want("TryAcquire", err, ErrInvalidDomain)
		_, err = m.TryAcquire("", -1)
		want("TryAcquire empty", err, ErrInvalidDomain)
		_, err = m.Kill(long, -1, "")
		want("Kill", err, ErrInvalidDomain)
		_, err = m.Kill("x", -1, "")
		want("Kill neg", err, ErrInvalidOffset)
		_, err = m.Redrive("x", -1)
		want("Redrive neg", err, ErrInvalidOffset)
		_, err = m.Extend(long, Token{}, 0)
		want("Extend", err, ErrInvalidDomain)
		_, err = m.DeadLetters(long)
		want("DeadLetters", err, ErrInvalidDomain)
		_, err = m.Inspect("")
		want("Inspect", err, ErrInvalidDomain)
		want("Forget", m.Forget(""), ErrInvalidDomain)
		want("Pause", m.Pause(long), ErrInvalidDomain)
		m.Close()
		_, err = m.TryAcquire(long, -1)
		want("closed TryAcquire", err, ErrClosed)
		_, err = m.Kill(long, -1, "")
		want("closed Kill", err, ErrClosed)
		_, err = m.Extend(long, Token{}, 0)
		want("closed Extend", err, ErrClosed)
		_, err = m.DeadLetters(long)
		want("closed DeadLetters", err, ErrClosed)
		_, err = m.DeadLetters("")
		want("closed DeadLetters all", err, ErrClosed)
	}
}

func TestEdgeSucceedNextTTLReap(t *testing.T) {
	fc := clock.NewFake(rv1Epoch)
	m, _ := New(WithClock(fc), WithLeaseTTL(time.Second), WithMaxRetries(5))
	a, _ := m.TryAcquire("d", 0)
	m.TryAcquire("d", 1)
	m.TryAcquire("d", 2)
	// 0 expires, is requeued with carried attempts
	fc.Advance(2 * time.Second)
	exp, _ := m.Reap()
	if len(exp) != 1 || !exp[0].HasNext || exp[0].Next != 0 {
		t.Fatalf("reap %+v", exp)
	}
	b, _ := m.TryAcquire("d", 0)
	if b.Status != Acquired || b.RetryCount != 1 || !b.AcquiredAt.Equal(rv1Epoch) {
		t.Fatalf("regrant %+v", b)
	}
	if _, err := m.Succeed("d", a.Token); !errors.Is(err, ErrLeaseExpired) {
		t.Fatal(err)
	}
	fc.Advance(500 * time.Millisecond)
	sr, err := m.SucceedNext("d", b.Token)
	if err != nil || sr.Status != NextAcquired || sr.Lease.Offset != 1 || sr.Lease.RetryCount != 0 {
		t.Fatalf("%+v %v", sr, err)
	}
	if !sr.Lease.ExpiresAt.Equal(fc.Now().Add(time.Second)) || !sr.Lease.AcquiredAt.Equal(fc.Now()) {
		t.Fatalf("lease times %+v", sr.Lease)
	}
	fc.Advance(2 * time.Second)
	exp, _ = m.Reap()
	if len(exp) != 1 || exp[0].Offset != 1 || exp[0].Token != sr.Lease.Token || exp[0].Attempts != 1 {
		t.Fatalf("reap2 %+v", exp)
	}
	// the expired 1 is requeued at the front; FailNext on a stale token fails
	if _, err := m.FailNext("d", sr.Lease.Token, nil); !errors.Is(err, ErrLeaseExpired) {
		t.Fatal(err)
	}
	info, _ := m.Inspect("d")
	if info.Leased || len(info.Backlog) != 2 || info.Backlog[0] != 1 {
		t.Fatalf("info %+v", info)
	}
	if err := CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
}

func TestEdgeFailNextCarried(t *testing.T) {
	fc := clock.NewFake(rv1Epoch)
	m, _ := New(WithClock(fc), WithMaxRetries(0))
	a, _ := m.TryAcquire("d", 0)
	m.TryAcquire("d", 1)
	m.TryAcquire("d", 2)
	// force release 0 twice
	m.ForceRelease("d")
	a, _ = m.TryAcquire("d", 0)
	m.ForceRelease("d")
	a, _ = m.TryAcquire("d", 0)
	fr, err := m.FailNext("d", a.Token, errors.New("boom"))
	if err != nil || fr.Status != GiveUpNextAcquired || fr.Lease.Offset != 1 || fr.RetryCount != 0 {
		t.Fatalf("%+v %v", fr, err)
	}
	dl, _ := m.DeadLetters("d")
	if len(dl) != 1 || dl[0].Attempts != 3 {
		t.Fatalf("dl %+v", dl)
	}
	// kill 1 in flight: revoked, then 2 is next
	h, err := m.Kill("d", 1, "")
	if err != nil || !h.HasNext || h.Next != 2 {
		t.Fatal(h, err)
	}
	if _, err := m.SucceedNext("d", fr.Lease.Token); !errors.Is(err, ErrLeaseRevoked) {
		t.Fatal(err)
	}
	m.Redrive("d", 0)
	m.Redrive("d", 1)
	info, _ := m.Inspect("d")
	if len(info.Backlog) != 3 || info.Backlog[0] != 1 || info.Failed != 0 {
		t.Fatalf("%+v", info)
	}
	b, _ := m.TryAcquire("d", 1)
	if b.Status != Acquired || b.RetryCount != 0 {
		t.Fatalf("%+v", b)
	}
	fr, _ = m.FailNext("d", b.Token, nil)
	dl, _ = m.DeadLetters("d")
	if len(dl) != 1 || dl[0].Attempts != 1 {
		t.Fatalf("redriven dl %+v", dl)
	}
	if err := CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
}

type rv1CountObs struct {
	mu sync.Mutex
	n  map[EventKind]uint64
}

func (o *rv1CountObs) Observe(e Event) {
	o.mu.Lock()
	o.n[e.Kind]++
	o.mu.Unlock()
}

func TestEdgeConcurrentMixedStats(t *testing.T) {
	fc := clock.NewFake(rv1Epoch)
	obs := &rv1CountObs{n: map[EventKind]uint64{}}
	m, _ := New(WithClock(fc), WithLeaseTTL(time.Second), WithMaxRetries(1), WithObserver(obs), WithShards(2), WithParkOnDeadLetter())
	domains := []string{"a", "b", "abcdefghijklmnopqrstuvwxyz01", "abcdefghijklmnopqrstuvwxyz012"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rnd := uint64(g*7919 + 1)
			next := func(n int) int { rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17; return int(rnd % uint64(n)) }
			toks := map[string]Token{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := domains[next(len(domains))]
				switch next(14) {
				case 0, 1, 2:
					res, err := m.TryAcquire(d, int64(next(40)))
					var boe *BacklogOrderError
					if errors.As(err, &boe) {
						res, _ = m.TryAcquire(d, boe.Expected)
					}
					if res.Status == Acquired || res.Status == AlreadyAcquired {
						toks[d] = res.Token
					}
				case 3, 4:
					if sr, err := m.SucceedNext(d, toks[d]); err == nil && sr.Status == NextAcquired {
						toks[d] = sr.Lease.Token
					}
				case 5:
					if fr, err := m.FailNext(d, toks[d], errors.New("x")); err == nil && fr.Status == GiveUpNextAcquired {
						toks[d] = fr.Lease.Token
					}
				case 6:
					m.Succeed(d, toks[d])
				case 7:
					m.Kill(d, int64(next(40)), "k")
				case 8:
					m.Redrive(d, int64(next(40)))
				case 9:
					m.ForceRelease(d)
				case 10:
					if next(2) == 0 {
						m.Pause(d)
					} else {
						m.Resume(d)
					}
				case 11:
					m.Forget(d)
				case 12:
					fc.Advance(300 * time.Millisecond)
					m.Reap()
				case 13:
					m.Extend(d, toks[d], time.Second)
					_ = m.Stats()
				}
			}
		}(g)
	}
	time.Sleep(400 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
	s := m.Stats()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := Stats{
		Acquired: obs.n[EventAcquired], Enqueued: obs.n[EventEnqueued], Processed: obs.n[EventProcessed],
		Retried: obs.n[EventRetrying], DeadLettered: obs.n[EventDeadLettered], Expired: obs.n[EventExpired],
		Requeued: obs.n[EventRequeued], Extended: obs.n[EventExtended], Rejected: obs.n[EventRejected],
		OutOfOrder: obs.n[EventOutOfOrder], Killed: obs.n[EventKilled], Redriven: obs.n[EventRedriven],
		Released: obs.n[EventReleased], Paused: obs.n[EventPaused], Resumed: obs.n[EventResumed], Forgotten: obs.n[EventForgotten],
	}
	if s != want {
		t.Fatalf("stats %+v\nobserved %+v", s, want)
	}
	t.Logf("%+v", s)
}

// A lease granted ten seconds before the Unix epoch with a ten-second TTL
// must expire; its expiry instant is 0, which the Manager reads as "never".
func TestEdgeLeaseExpiringAtUnixEpochNeverExpires(t *testing.T) {
	fc := clock.NewFake(time.Unix(-10, 0).UTC())
	m, err := New(WithClock(fc), WithLeaseTTL(10*time.Second), WithMaxRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.TryAcquire("d", 0)
	if err != nil || res.Status != Acquired {
		t.Fatal(res, err)
	}
	if res.ExpiresAt.IsZero() {
		t.Errorf("lease granted with a TTL reports no expiry (ExpiresAt zero)")
	}
	fc.Advance(time.Hour)
	if exp, _ := m.Reap(); len(exp) != 1 {
		t.Errorf("Reap an hour past the TTL revoked %d leases, want 1", len(exp))
	}
	if _, err := m.Succeed("d", res.Token); !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("Succeed an hour past the TTL: %v, want ErrLeaseExpired", err)
	}
}
