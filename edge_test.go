package worklease_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

func rv1Open(t *testing.T, j *memjournal.Journal, clk *clock.Fake, opts ...worklease.Option) *worklease.Manager {
	t.Helper()
	m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j), worklease.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rv1Check(t *testing.T, m *worklease.Manager) {
	t.Helper()
	if err := worklease.CheckInvariants(m); err != nil {
		t.Fatal(err)
	}
}

func TestEdgeRestoredTokens(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	j := &memjournal.Journal{}
	m1 := rv1Open(t, j, clk, worklease.WithMaxRetries(1))
	a, _ := m1.TryAcquire("d", 0)
	m1.TryAcquire("d", 1)
	b, _ := m1.TryAcquire("e", 0)
	m1.Close()

	m2 := rv1Open(t, j.Reopen(), clk, worklease.WithMaxRetries(1))
	rv1Check(t, m2)
	if r, _ := m2.TryAcquire("d", 0); r.Status != worklease.AlreadyAcquired || r.Token != a.Token {
		t.Fatalf("restored %+v want token %v", r, a.Token)
	}
	// snapshot with the restored lease, and restart again
	if err := m2.Snapshot(); err != nil {
		t.Fatal(err)
	}
	m2.ForceRelease("e")
	e2, _ := m2.TryAcquire("e", 0)
	if e2.Token == b.Token || e2.Token.Fence() <= b.Token.Fence() {
		t.Fatalf("regrant %v after %v", e2.Token, b.Token)
	}
	if _, err := m2.Succeed("e", b.Token); !errors.Is(err, worklease.ErrLeaseRevoked) {
		t.Fatalf("old e token: %v", err)
	}
	m2.Close()

	m3 := rv1Open(t, j.Reopen(), clk, worklease.WithMaxRetries(1))
	rv1Check(t, m3)
	sr, err := m3.SucceedNext("d", a.Token)
	if err != nil || sr.Status != worklease.NextAcquired || sr.Lease.Offset != 1 {
		t.Fatalf("%+v %v", sr, err)
	}
	if sr.Lease.Token.Fence() != a.Token.Fence()+1 {
		t.Fatalf("fence %d after %d", sr.Lease.Token.Fence(), a.Token.Fence())
	}
	if _, err := m3.Succeed("e", b.Token); !errors.Is(err, worklease.ErrLeaseRevoked) {
		t.Fatalf("old e token after restart: %v", err)
	}
	if _, err := m3.Succeed("e", e2.Token); err != nil {
		t.Fatalf("e2 after restart: %v", err)
	}
	rv1Check(t, m3)
	m3.Close()
}

// WithObserver promises events "in the order they happened for each
// domain". A domain forgotten while another goroutine is still delivering
// its earlier events, then created again, has the new incarnation's events
// delivered before the old one's Forgotten.
func TestEdgeObserverOrderAcrossForget(t *testing.T) {
	blocked, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var seen []worklease.EventKind
	obs := worklease.ObserverFunc(func(e worklease.Event) {
		mu.Lock()
		seen = append(seen, e.Kind)
		mu.Unlock()
		if e.Kind == worklease.EventProcessed {
			close(blocked)
			<-release
		}
	})
	m, err := worklease.New(worklease.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.TryAcquire("d", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Succeed("d", a.Token) // its goroutine delivers Processed, and blocks there
	}()
	<-blocked
	if err := m.Forget("d"); err != nil { // Forgotten is left to the goroutine delivering
		t.Fatal(err)
	}
	if r, err := m.TryAcquire("d", 0); err != nil || r.Status != worklease.Acquired {
		t.Fatal(r, err)
	}
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	want := []worklease.EventKind{worklease.EventAcquired, worklease.EventProcessed, worklease.EventForgotten, worklease.EventAcquired}
	if !slices.Equal(seen, want) {
		t.Fatalf("observer saw %v, want %v", seen, want)
	}
}

// rv1GateJournal holds back the durability of a Forgotten record until
// open is closed.
type rv1GateJournal struct {
	*memjournal.Journal
	mu        sync.Mutex
	forgotten uint64
	appended  chan struct{}
	open      chan struct{}
}

func (j *rv1GateJournal) AppendRecord(rec worklease.Record) (uint64, error) {
	seq, err := j.Journal.AppendRecord(rec)
	if err == nil && rec.Kind == worklease.EventForgotten {
		j.mu.Lock()
		j.forgotten = seq
		j.mu.Unlock()
		close(j.appended)
	}
	return seq, err
}

func (j *rv1GateJournal) Wait(seq uint64) error {
	j.mu.Lock()
	gated := j.forgotten != 0 && seq >= j.forgotten
	j.mu.Unlock()
	if gated {
		<-j.open
	}
	return j.Journal.Wait(seq)
}

// The design: "a domain remembers the sequence number of its last record,
// and any call on that domain waits until the journal is durable up to it
// before returning". A call that meets a domain Forget has dropped, but
// whose Forgotten record is not durable yet, answers at once as if the
// domain were unknown: here DeadLetters reports no dead letters while a
// crash could still bring them back.
func TestEdgeCallAfterForgetWaitsForItsRecord(t *testing.T) {
	j := &rv1GateJournal{Journal: &memjournal.Journal{}, appended: make(chan struct{}), open: make(chan struct{})}
	m, err := worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.TryAcquire("d", 0)
	if _, err := m.Fail("d", a.Token, errors.New("x")); err != nil {
		t.Fatal(err)
	}
	forgot := make(chan error, 1)
	go func() { forgot <- m.Forget("d") }()
	<-j.appended // Forget has written its record and waits for it

	got := make(chan []worklease.DeadLetter, 1)
	go func() {
		dl, _ := m.DeadLetters("d")
		got <- dl
	}()
	select {
	case dl := <-got:
		t.Errorf("DeadLetters returned %v before the Forgotten record was durable", dl)
	case <-time.After(200 * time.Millisecond):
	}
	close(j.open)
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
}

// Domains skips a record Forget has marked dropped without waiting for the
// Forgotten record to be durable: it reports the domain gone while a crash
// could still bring it back.
func TestEdgeDomainsAfterForgetWaitsForItsRecord(t *testing.T) {
	j := &rv1GateJournal{Journal: &memjournal.Journal{}, appended: make(chan struct{}), open: make(chan struct{})}
	m, err := worklease.New(worklease.WithJournal(j))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.TryAcquire("d", 0)
	if _, err := m.Succeed("d", a.Token); err != nil {
		t.Fatal(err)
	}
	forgot := make(chan error, 1)
	go func() { forgot <- m.Forget("d") }()
	<-j.appended
	got := make(chan []string, 1)
	go func() {
		d, _ := m.Domains()
		got <- d
	}()
	select {
	case d := <-got:
		t.Errorf("Domains returned %q before the Forgotten record was durable", d)
	case <-time.After(200 * time.Millisecond):
	}
	close(j.open)
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
}
