package worklease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

// Tests of the admin calls (Kill, Redrive, Forget, Pause, Resume,
// ForceRelease, Inspect, Leases, DeadLetters), parking, and Stats.

func TestKill(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, m *worklease.Manager, clk *clock.Fake)
	}{
		{"queued behind a lease", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			holder := acquire(t, m, "A", 1, worklease.Acquired)
			acquire(t, m, "A", 2, worklease.Enqueued)
			acquire(t, m, "A", 3, worklease.Enqueued)
			got, err := m.Kill("A", 2, "spam")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{}, got, "the domain is busy: no hint")
			require.Equal(t, []int64{3}, inspect(t, m, "A").Backlog)
			requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 2, Attempts: 0, At: clk.Now()}, "spam")
			acquire(t, m, "A", 2, worklease.AlreadyFailed)
			sres, err := m.Succeed("A", holder.Token)
			require.NoError(t, err, "the holder of another offset is not disturbed")
			require.Equal(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 3}, sres)
		}},
		{"queued at the head of an idle domain", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			holder := acquire(t, m, "A", 1, worklease.Acquired)
			acquire(t, m, "A", 2, worklease.Enqueued)
			acquire(t, m, "A", 3, worklease.Enqueued)
			_, err := m.Succeed("A", holder.Token)
			require.NoError(t, err)
			got, err := m.Kill("A", 2, "spam")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{Next: 3, HasNext: true}, got, "acquire the new head to keep the domain moving")
			acquire(t, m, "A", 3, worklease.Acquired)
		}},
		{"queued after its lease expired", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			acquire(t, m, "A", 1, worklease.Acquired)
			clk.Advance(time.Minute)
			_, err := m.Reap()
			require.NoError(t, err)
			got, err := m.Kill("A", 1, "poison")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{}, got)
			requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 1, Attempts: 1, At: clk.Now()}, "poison")
		}},
		{"in flight", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			holder := acquire(t, m, "A", 1, worklease.Acquired)
			_, err := m.Fail("A", holder.Token, nil)
			require.NoError(t, err)
			acquire(t, m, "A", 2, worklease.Enqueued)
			got, err := m.Kill("A", 1, "stuck")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{Next: 2, HasNext: true}, got)
			requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 1, Attempts: 2, At: clk.Now()}, "stuck")
			info := inspect(t, m, "A")
			require.False(t, info.Leased)
			require.Equal(t, []int64{2}, info.Backlog)
			for _, call := range staleCalls {
				require.ErrorIs(t, call.call(m, "A", holder.Token), worklease.ErrLeaseRevoked, call.name)
			}
			next := acquire(t, m, "A", 2, worklease.Acquired)
			require.Greater(t, next.Token.Fence(), holder.Token.Fence())
			for _, call := range staleCalls {
				require.ErrorIs(t, call.call(m, "A", holder.Token), worklease.ErrLeaseRevoked, "%s, after the next grant", call.name)
			}
		}},
		{"in flight, no backlog", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			acquire(t, m, "A", 1, worklease.Acquired)
			got, err := m.Kill("A", 1, "stuck")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{}, got)
			require.Equal(t, worklease.DomainInfo{Failed: 1}, inspect(t, m, "A"))
		}},
		{"never seen, in a known domain", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			acquire(t, m, "A", 1, worklease.Acquired)
			got, err := m.Kill("A", 9, "cancelled")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{}, got)
			requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 9, Attempts: 0, At: clk.Now()}, "cancelled")
			acquire(t, m, "A", 9, worklease.AlreadyFailed) // failed before it arrives
			require.Empty(t, inspect(t, m, "A").Backlog)
		}},
		{"never seen, in an unknown domain", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			got, err := m.Kill("A", 9, "cancelled")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{}, got)
			requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 9, Attempts: 0, At: clk.Now()}, "cancelled")
			acquire(t, m, "A", 9, worklease.AlreadyFailed)
		}},
		{"processed", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			res := acquire(t, m, "A", 1, worklease.Acquired)
			_, err := m.Succeed("A", res.Token)
			require.NoError(t, err)
			before := snapshot(t, m, "A")
			got, err := m.Kill("A", 1, "too late")
			require.ErrorIs(t, err, worklease.ErrAlreadyProcessed)
			require.Equal(t, worklease.Head{}, got)
			require.Equal(t, before, snapshot(t, m, "A"))
			require.Zero(t, m.Stats().Killed)
		}},
		{"already failed: a no-op", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			_, err := m.Kill("A", 1, "first")
			require.NoError(t, err)
			at := clk.Now()
			clk.Advance(time.Minute)
			got, err := m.Kill("A", 1, "second")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{}, got)
			requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 1, Attempts: 0, At: at}, "first")
			require.Equal(t, uint64(1), m.Stats().Killed)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, clk := newManager(t, worklease.WithLeaseTTL(time.Minute))
			tt.run(t, m, clk)
		})
	}
}

// requireDeadLetter checks that want (with a cause whose text is cause) is
// the domain's only dead letter.
func requireDeadLetter(t *testing.T, m *worklease.Manager, want worklease.DeadLetter, cause string) {
	t.Helper()
	got := deadLetters(t, m, want.Domain)
	require.Len(t, got, 1)
	require.EqualError(t, got[0].Cause, cause)
	want.Cause = got[0].Cause
	require.Equal(t, want, got[0])
}

func TestKillRejectsNegativeOffset(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	_, err := m.Kill("A", -1, "x")
	require.ErrorIs(t, err, worklease.ErrInvalidOffset)
	require.Nil(t, worklease.RecordOf(m, "A"), "nothing created")
}

func TestForget(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	tests := []struct {
		name    string
		setup   func(t *testing.T, m *worklease.Manager, clk *clock.Fake)
		wantErr error
	}{
		{"unknown domain", func(*testing.T, *worklease.Manager, *clock.Fake) {}, nil},
		{"idle and empty", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) {
			res := acquire(t, m, "A", 1, worklease.Acquired)
			_, err := m.Succeed("A", res.Token)
			require.NoError(t, err)
		}, nil},
		{"paused, idle and empty", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) {
			require.NoError(t, m.Pause("A")) // forgetting would drop the pause
		}, worklease.ErrDomainBusy},
		{"paused then resumed", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) {
			require.NoError(t, m.Pause("A"))
			_, err := m.Resume("A")
			require.NoError(t, err)
		}, nil},
		{"with dead letters", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) {
			_, err := m.Kill("A", 4, "x")
			require.NoError(t, err)
		}, nil},
		{"last attempt expired", func(t *testing.T, m *worklease.Manager, clk *clock.Fake) {
			acquire(t, m, "A", 1, worklease.Acquired)
			clk.Advance(ttl) // revoked lazily, and dead-lettered: no retries
		}, nil},
		{"leased", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) {
			acquire(t, m, "A", 1, worklease.Acquired)
		}, worklease.ErrDomainBusy},
		{"idle with a backlog", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) {
			res := acquire(t, m, "A", 1, worklease.Acquired)
			acquire(t, m, "A", 2, worklease.Enqueued)
			_, err := m.Succeed("A", res.Token)
			require.NoError(t, err)
		}, worklease.ErrDomainBusy},
		{"paused with a backlog", func(t *testing.T, m *worklease.Manager, _ *clock.Fake) {
			require.NoError(t, m.Pause("A"))
			acquire(t, m, "A", 1, worklease.Enqueued)
		}, worklease.ErrDomainBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, clk := newManager(t, worklease.WithMaxRetries(0), worklease.WithLeaseTTL(ttl))
			tt.setup(t, m, clk)
			before := snapshot(t, m, "A")

			err := m.Forget("A")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, before, snapshot(t, m, "A"))
				return
			}
			require.NoError(t, err)
			require.Nil(t, worklease.RecordOf(m, "A"), "the domain is gone")
			require.Equal(t, worklease.DomainInfo{}, inspect(t, m, "A"))
			require.Empty(t, deadLetters(t, m, "A"))
			require.NoError(t, m.Forget("A"), "forgetting it again changes nothing")
		})
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	require.NoError(t, m.Pause("A")) // a domain never seen
	acquire(t, m, "A", 1, worklease.Enqueued)
	acquire(t, m, "A", 2, worklease.Enqueued)
	acquire(t, m, "A", 1, worklease.Enqueued)
	require.Equal(t, worklease.DomainInfo{Paused: true, Backlog: []int64{1, 2}}, inspect(t, m, "A"))
	require.NoError(t, m.Pause("A"), "pausing a paused domain changes nothing")
	require.Equal(t, uint64(1), m.Stats().Paused)

	got, err := m.Resume("A")
	require.NoError(t, err)
	require.Equal(t, worklease.Head{Next: 1, HasNext: true}, got, "acquire the head")
	got, err = m.Resume("A")
	require.NoError(t, err)
	require.Equal(t, worklease.Head{Next: 1, HasNext: true}, got, "resuming a running domain changes nothing")
	require.Equal(t, uint64(1), m.Stats().Resumed)

	first := acquire(t, m, "A", 1, worklease.Acquired)
	got, err = m.Resume("A")
	require.NoError(t, err)
	require.Equal(t, worklease.Head{}, got, "busy: no hint")
	require.Equal(t, []int64{2}, drain(t, m, "A", first.Token))
}

// Every call on a closed Manager returns ErrClosed.
func TestAdminCallsOnClosedManager(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, worklease.WithLeaseTTL(time.Minute))
	res := acquire(t, m, "A", 1, worklease.Acquired)
	_, err := m.Kill("A", 7, "x")
	require.NoError(t, err)
	statsBefore := m.Stats()
	require.NoError(t, m.Close())

	calls := map[string]func() error{
		"Kill":         func() error { _, err := m.Kill("A", 2, "x"); return err },
		"Redrive":      func() error { _, err := m.Redrive("A", 7); return err },
		"ForceRelease": func() error { _, err := m.ForceRelease("A"); return err },
		"Pause":        func() error { return m.Pause("A") },
		"Resume":       func() error { _, err := m.Resume("A"); return err },
		"Forget":       func() error { return m.Forget("B") },
		"Inspect":      func() error { _, err := m.Inspect("A"); return err },
		"Leases":       func() error { _, err := m.Leases(); return err },
		"DeadLetters":  func() error { _, err := m.DeadLetters("A"); return err },
		"DeadLetters all": func() error {
			_, err := m.DeadLetters("")
			return err
		},
		"Reap":       func() error { _, err := m.Reap(); return err },
		"Extend":     func() error { _, err := m.Extend("A", res.Token, time.Minute); return err },
		"TryAcquire": func() error { _, err := m.TryAcquire("A", 2); return err },
		"Succeed":    func() error { _, err := m.Succeed("A", res.Token); return err },
		"Fail":       func() error { _, err := m.Fail("A", res.Token, nil); return err },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), worklease.ErrClosed, name)
	}
	require.Equal(t, statsBefore, m.Stats(), "Stats still answers, and nothing changed")
}

// Stats counts every transition of a scripted sequence exactly.
func TestStats(t *testing.T) {
	t.Parallel()
	m, clk := newManager(t, worklease.WithLeaseTTL(10*time.Second), worklease.WithMaxRetries(1), worklease.WithBestEffortOrdering())
	require.Equal(t, worklease.Stats{}, m.Stats())
	must := func(err error) {
		t.Helper()
		require.NoError(t, err)
	}

	// Domain A: retry, extend, reject, expire into a dead letter, admin calls.
	tok1 := acquire(t, m, "A", 1, worklease.Acquired).Token // Acquired 1
	acquire(t, m, "A", 2, worklease.Enqueued)               // Enqueued 1
	acquire(t, m, "A", 2, worklease.Enqueued)               // duplicate: not counted
	acquire(t, m, "A", 1, worklease.AlreadyAcquired)        // not counted
	_, err := m.Fail("A", tok1, nil)                        // Retried 1
	must(err)
	_, err = m.Extend("A", tok1, 20*time.Second) // Extended 1
	must(err)
	_, err = m.Extend("A", tok1, time.Second) // no change: not counted
	must(err)
	_, err = m.Succeed("A", worklease.Token{}) // Rejected 1
	require.ErrorIs(t, err, worklease.ErrTokenMismatch)
	clk.Advance(30 * time.Second)
	exp, err := m.Reap() // Expired 1, DeadLettered 1
	must(err)
	require.Len(t, exp, 1)
	_, err = m.Succeed("A", tok1) // Rejected 2
	require.ErrorIs(t, err, worklease.ErrLeaseExpired)
	_, err = m.Succeed("nobody", tok1) // an unknown domain: no event, not counted
	require.ErrorIs(t, err, worklease.ErrNoLease)
	tok2 := acquire(t, m, "A", 2, worklease.Acquired).Token // Acquired 2
	_, err = m.Succeed("A", tok2)                           // Processed 1
	must(err)
	_, err = m.Kill("A", 3, "x") // Killed 1, DeadLettered 2
	must(err)
	_, err = m.Kill("A", 3, "x") // already failed: not counted
	must(err)
	_, err = m.Redrive("A", 1) // Redriven 1
	must(err)
	acquire(t, m, "A", 1, worklease.Acquired) // Acquired 3
	_, err = m.ForceRelease("A")              // Released 1
	must(err)
	must(m.Pause("A"))     // Paused 1
	must(m.Pause("A"))     // not counted
	_, err = m.Resume("A") // Resumed 1
	must(err)
	_, err = m.Resume("A") // not counted
	must(err)
	tok3 := acquire(t, m, "A", 1, worklease.Acquired).Token // Acquired 4
	_, err = m.Succeed("A", tok3)                           // Processed 2
	must(err)

	// Domain B: an out-of-order grant, then Forget.
	b1 := acquire(t, m, "B", 1, worklease.Acquired).Token // Acquired 5
	acquire(t, m, "B", 2, worklease.Enqueued)             // Enqueued 2
	acquire(t, m, "B", 3, worklease.Enqueued)             // Enqueued 3
	_, err = m.Succeed("B", b1)                           // Processed 3
	must(err)
	b3 := acquire(t, m, "B", 3, worklease.Acquired).Token // OutOfOrder 1, Acquired 6
	sres, err := m.Succeed("B", b3)                       // Processed 4
	must(err)
	b2 := acquire(t, m, "B", sres.Next, worklease.Acquired).Token // Acquired 7
	_, err = m.Succeed("B", b2)                                   // Processed 5
	must(err)
	must(m.Forget("B")) // Forgotten 1
	must(m.Forget("B")) // unknown now: not counted

	require.Equal(t, worklease.Stats{
		Acquired:     7,
		Enqueued:     3,
		Processed:    5,
		Retried:      1,
		DeadLettered: 2,
		Expired:      1,
		Requeued:     1, // the forced release
		Extended:     1,
		Rejected:     2,
		OutOfOrder:   1,
		Killed:       1,
		Redriven:     1,
		Released:     1,
		Paused:       1,
		Resumed:      1,
		Forgotten:    1,
	}, m.Stats())
}

// A dead letter's Attempts counts the attempts made, the last one included,
// whether the offset is killed in flight or queued after a forced release
// put it back (a release is not a failed attempt, but it was an attempt),
// and a restart, from the records or from a snapshot, keeps the count.
func TestKillAfterForceReleaseCountsEveryAttempt(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"live", "replayed", "snapshot"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j := &memjournal.Journal{}
			clk := clock.NewFake(epoch)
			m := must(worklease.New(worklease.WithJournal(j), worklease.WithClock(clk)))(t)
			res := acquire(t, m, "A", 1, worklease.Acquired)
			_, err := m.Fail("A", res.Token, errors.New("first"))
			require.NoError(t, err) // attempt 2 is in flight
			got, err := m.ForceRelease("A")
			require.NoError(t, err)
			require.Equal(t, worklease.Head{Next: 1, HasNext: true}, got)
			switch name {
			case "replayed", "snapshot":
				if name == "snapshot" {
					require.NoError(t, m.Snapshot())
				}
				require.NoError(t, m.Close())
				m = must(worklease.New(worklease.WithJournal(j.Reopen()), worklease.WithClock(clk)))(t)
			}
			defer func() { require.NoError(t, m.Close()) }()
			_, err = m.Kill("A", 1, "poison")
			require.NoError(t, err)
			requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 1, Attempts: 2, At: epoch}, "poison")
		})
	}
}

// Stats keeps answering after Close with the final counts: the calls that
// Close refuses count nothing.
func TestStatsAfterClose(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	res := acquire(t, m, "A", 1, worklease.Acquired)
	acquire(t, m, "A", 2, worklease.Enqueued)
	_, err := m.Succeed("A", res.Token)
	require.NoError(t, err)
	want := worklease.Stats{Acquired: 1, Enqueued: 1, Processed: 1}
	require.Equal(t, want, m.Stats())
	require.NoError(t, m.Close())
	require.Equal(t, want, m.Stats())
	_, err = m.TryAcquire("A", 2)
	require.ErrorIs(t, err, worklease.ErrClosed)
	_, err = m.Succeed("A", res.Token)
	require.ErrorIs(t, err, worklease.ErrClosed)
	require.Equal(t, want, m.Stats())
}

// A force-released offset granted again is on its next attempt: the grant,
// and a dead letter in flight after it, count the released attempt too,
// before and after a restart.
func TestAttemptsAfterForceReleaseAndRegrant(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		j := &memjournal.Journal{}
		clk := clock.NewFake(epoch)
		var events []worklease.Event
		opts := []worklease.Option{worklease.WithClock(clk), worklease.WithMaxRetries(1),
			worklease.WithObserver(worklease.ObserverFunc(func(e worklease.Event) { events = append(events, e) }))}
		m := must(worklease.New(append(opts, worklease.WithJournal(j))...))(t)
		res := acquire(t, m, "A", 1, worklease.Acquired) // attempt 1
		_, err := m.Fail("A", res.Token, errors.New("first"))
		require.NoError(t, err) // attempt 2
		_, err = m.ForceRelease("A")
		require.NoError(t, err)
		if restart {
			require.NoError(t, m.Snapshot())
			require.NoError(t, m.Close())
			m = must(worklease.New(append(opts, worklease.WithJournal(j.Reopen()))...))(t)
		}
		events = nil
		again := acquire(t, m, "A", 1, worklease.Acquired) // attempt 3
		require.Equal(t, 1, again.RetryCount, "one attempt failed")
		require.Equal(t, worklease.EventAcquired, events[0].Kind)
		require.Equal(t, 3, events[0].Attempt, "the attempt number")
		res2, err := m.Fail("A", again.Token, errors.New("second"))
		require.NoError(t, err)
		require.Equal(t, worklease.GiveUpNoBacklog, res2.Status)
		requireDeadLetter(t, m, worklease.DeadLetter{Domain: "A", Offset: 1, Attempts: 3, At: epoch}, "second")
		require.NoError(t, m.Close())
	}
}
