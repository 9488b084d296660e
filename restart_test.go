package worklease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

// r2State is everything a caller can read of a Manager's state.
type r2State struct {
	Domains []string
	Info    map[string]worklease.DomainInfo
	Leases  []worklease.LeaseInfo
	Dead    []string
}

func r2Dump(t *testing.T, m *worklease.Manager) r2State {
	t.Helper()
	var s r2State
	var err error
	s.Domains, err = m.Domains()
	require.NoError(t, err)
	s.Info = map[string]worklease.DomainInfo{}
	for _, d := range s.Domains {
		info, err := m.Inspect(d)
		require.NoError(t, err)
		info.Lease.AcquiredAt = info.Lease.AcquiredAt.UTC()
		info.Lease.ExpiresAt = info.Lease.ExpiresAt.UTC()
		s.Info[d] = info
	}
	s.Leases, err = m.Leases()
	require.NoError(t, err)
	for i := range s.Leases {
		s.Leases[i].AcquiredAt = s.Leases[i].AcquiredAt.UTC()
		s.Leases[i].ExpiresAt = s.Leases[i].ExpiresAt.UTC()
	}
	dls, err := m.DeadLetters("")
	require.NoError(t, err)
	for _, dl := range dls {
		s.Dead = append(s.Dead, fmt.Sprintf("%s/%d attempts=%d at=%v cause=%v", dl.Domain, dl.Offset, dl.Attempts, dl.At.UTC(), dl.Cause))
	}
	return s
}

// r2Restart closes m and builds a Manager on j again, after a snapshot if
// snap is set.
func r2Restart(t *testing.T, m *worklease.Manager, j *memjournal.Journal, snap bool, opts ...worklease.Option) (*worklease.Manager, *memjournal.Journal) {
	t.Helper()
	if snap {
		require.NoError(t, m.Snapshot())
	}
	require.NoError(t, m.Close())
	j = j.Reopen()
	m2, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j)}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, worklease.CheckInvariants(m2))
	t.Cleanup(func() { _ = m2.Close() })
	return m2, j
}

var errR2 = errors.New("boom")

// Attempts made after ForceRelease, a retry and a lease granted again read
// the same after a restart, with and without a snapshot, and a dead letter
// written after the restart counts them as one written before it would.
func TestRestartForceReleaseAttemptsAcrossRestart(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshot=", snap), func(t *testing.T) {
			clk := clock.NewFake(epoch)
			opts := []worklease.Option{worklease.WithClock(clk), worklease.WithMaxRetries(1)}
			build := func() (*worklease.Manager, *memjournal.Journal) {
				j := &memjournal.Journal{}
				m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j)}, opts...)...)
				require.NoError(t, err)
				// a: attempt 1 fails (retry), attempt 2 force-released, queued.
				r := acquire(t, m, "a", 1, worklease.Acquired)
				_, err = m.Fail("a", r.Token, errR2)
				require.NoError(t, err)
				clk.Advance(time.Second)
				_, err = m.ForceRelease("a")
				require.NoError(t, err)
				// b: attempt 1 force-released, attempt 2 in flight.
				acquire(t, m, "b", 1, worklease.Acquired)
				_, err = m.ForceRelease("b")
				require.NoError(t, err)
				acquire(t, m, "b", 1, worklease.Acquired)
				// c: attempt 1 force-released, attempt 2 force-released, attempt 3 in flight, then a Kill in flight
				acquire(t, m, "c", 1, worklease.Acquired)
				_, err = m.ForceRelease("c")
				require.NoError(t, err)
				acquire(t, m, "c", 1, worklease.Acquired)
				_, err = m.ForceRelease("c")
				require.NoError(t, err)
				acquire(t, m, "c", 1, worklease.Acquired)
				return m, j
			}
			finish := func(m *worklease.Manager) r2State {
				_, err := m.Kill("a", 1, "gone")
				require.NoError(t, err)
				lb, err := m.Inspect("b")
				require.NoError(t, err)
				_, err = m.Fail("b", lb.Lease.Token, errR2) // retry
				require.NoError(t, err)
				_, err = m.Fail("b", lb.Lease.Token, errR2) // give up
				require.NoError(t, err)
				_, err = m.Kill("c", 1, "stop")
				require.NoError(t, err)
				return r2Dump(t, m)
			}
			m, j := build()
			before := r2Dump(t, m)
			m2, _ := r2Restart(t, m, j, snap, opts...)
			after := r2Dump(t, m2)
			// Tokens differ by Manager only when restored: compare without them.
			require.Equal(t, before.Dead, after.Dead)
			for d, info := range before.Info {
				a := after.Info[d]
				a.Lease.Token, info.Lease.Token = worklease.Token{}, worklease.Token{}
				require.Equal(t, info, a, d)
			}
			want := finish(func() *worklease.Manager { m, _ := build(); return m }())
			got := finish(m2)
			require.Equal(t, want.Dead, got.Dead)
		})
	}
}

// A lease restored from another Manager, given a TTL at New, and carried
// through snapshots and restarts with and without WithLeaseTTL, reads the
// same everywhere and its original token keeps working.
func TestRestartRestoredLeaseChain(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshot=", snap), func(t *testing.T) {
			clk := clock.NewFake(epoch)
			j := &memjournal.Journal{}
			m, err := worklease.New(worklease.WithJournal(j), worklease.WithClock(clk))
			require.NoError(t, err)
			r := acquire(t, m, "a", 1, worklease.Acquired)
			acquire(t, m, "a", 2, worklease.Enqueued)
			// B: with a TTL, the lease gets one at New.
			clk.Advance(time.Minute)
			m, j = r2Restart(t, m, j, snap, worklease.WithClock(clk), worklease.WithLeaseTTL(10*time.Second))
			sB := r2Dump(t, m)
			require.Equal(t, r.Token, sB.Leases[0].Token)
			require.Equal(t, epoch.Add(time.Minute+10*time.Second), sB.Leases[0].ExpiresAt)
			// C: without a TTL, the lease keeps it.
			clk.Advance(5 * time.Second)
			m, j = r2Restart(t, m, j, snap, worklease.WithClock(clk))
			sC := r2Dump(t, m)
			require.Equal(t, sB, sC)
			exp, err := m.Extend("a", r.Token, 20*time.Second)
			require.NoError(t, err)
			require.Equal(t, epoch.Add(time.Minute+25*time.Second), exp.UTC())
			// D: with a TTL again, after a snapshot.
			m, j = r2Restart(t, m, j, !snap, worklease.WithClock(clk), worklease.WithLeaseTTL(time.Second))
			sD := r2Dump(t, m)
			require.Equal(t, epoch.Add(time.Minute+25*time.Second), sD.Leases[0].ExpiresAt)
			require.Equal(t, r.Token, sD.Leases[0].Token)
			clk.Advance(21 * time.Second)
			ex, err := m.Reap()
			require.NoError(t, err)
			require.Len(t, ex, 1)
			require.Equal(t, r.Token, ex[0].Token)
			_, err = m.Succeed("a", r.Token)
			require.ErrorIs(t, err, worklease.ErrLeaseExpired)
			before := r2Dump(t, m)
			m, _ = r2Restart(t, m, j, snap, worklease.WithClock(clk))
			require.Equal(t, before, r2Dump(t, m))
			_, err = m.Succeed("a", r.Token)
			require.ErrorIs(t, err, worklease.ErrLeaseExpired)
		})
	}
}

func r2Processed(m *worklease.Manager, domain string, n int64) []int64 {
	var out []int64
	for o := range n {
		if worklease.CountsProcessed(m, domain, o) {
			out = append(out, o)
		}
	}
	return out
}

// Switching WithMonotonicOffsets at restarts, with and without snapshots,
// keeps what counted as processed, the queued offset below the watermark and
// its attempts.
func TestRestartMonotonicSwitchChain(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshot=", snap), func(t *testing.T) {
			clk := clock.NewFake(epoch)
			j := &memjournal.Journal{}
			mono := []worklease.Option{worklease.WithClock(clk), worklease.WithMonotonicOffsets(), worklease.WithMaxRetries(0)}
			exact := []worklease.Option{worklease.WithClock(clk), worklease.WithMaxRetries(0)}
			m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j)}, mono...)...)
			require.NoError(t, err)
			for o := range int64(5) {
				r := acquire(t, m, "a", o, worklease.Acquired)
				if o == 2 {
					_, err = m.Fail("a", r.Token, errR2)
				} else {
					_, err = m.Succeed("a", r.Token)
				}
				require.NoError(t, err)
			}
			_, err = m.Redrive("a", 2)
			require.NoError(t, err)
			acquire(t, m, "a", 2, worklease.Acquired)
			_, err = m.ForceRelease("a")
			require.NoError(t, err)
			before := r2Dump(t, m)
			require.Equal(t, []int64{0, 1, 3, 4}, r2Processed(m, "a", 8))

			m, j = r2Restart(t, m, j, snap, exact...)
			require.Equal(t, []int64{0, 1, 3, 4}, r2Processed(m, "a", 8))
			require.Equal(t, before, r2Dump(t, m))
			m, j = r2Restart(t, m, j, !snap, mono...)
			require.Equal(t, []int64{0, 1, 3, 4}, r2Processed(m, "a", 8))
			require.Equal(t, before, r2Dump(t, m))
			m, _ = r2Restart(t, m, j, snap, exact...)
			require.Equal(t, before, r2Dump(t, m))
			r := acquire(t, m, "a", 2, worklease.Acquired)
			_, err = m.Fail("a", r.Token, errR2)
			require.NoError(t, err)
			dls, err := m.DeadLetters("a")
			require.NoError(t, err)
			require.Len(t, dls, 1)
			require.Equal(t, 2, dls[0].Attempts)
		})
	}
}

// A ForceRelease cut short between its Released and Requeued records, in a
// journal written without WithMonotonicOffsets, reopened with it: the
// offset in flight never finished, yet it counts as processed. Reopened
// under the rule it was written with, or had the call not been cut short,
// it would be granted again.
func TestRestartCutShortReleaseThenMonotonicSwitch(t *testing.T) {
	clk := clock.NewFake(epoch)
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j), worklease.WithClock(clk))
	require.NoError(t, err)
	r := acquire(t, m, "a", 2, worklease.Acquired)
	_, err = m.Succeed("a", r.Token)
	require.NoError(t, err)
	acquire(t, m, "a", 1, worklease.Acquired) // in flight below the highest terminal offset
	seqs, _ := j.Records()
	j.FailAppendAt(seqs[len(seqs)-1] + 2) // the Requeued record after Released
	_, err = m.ForceRelease("a")
	require.ErrorIs(t, err, worklease.ErrJournalFailed)
	_ = m.Close()

	m2, err := worklease.New(worklease.WithJournal(j.Reopen()), worklease.WithClock(clk), worklease.WithMonotonicOffsets())
	require.NoError(t, err)
	defer m2.Close()
	res, err := m2.TryAcquire("a", 1)
	require.NoError(t, err)
	require.Equal(t, worklease.Acquired, res.Status, "offset 1 never finished, but the switch made it processed")
}

// An operator's Kill reason, or a worker's Fail cause, whose text happens to
// be ErrLeaseExpired's reads as that sentinel after a restart but not
// before: errors.Is(dl.Cause, ErrLeaseExpired) changes with the restart.
func TestRestartCauseTextSpoofsSentinelAfterRestart(t *testing.T) {
	clk := clock.NewFake(epoch)
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j), worklease.WithClock(clk))
	require.NoError(t, err)
	_, err = m.Kill("a", 1, worklease.ErrLeaseExpired.Error())
	require.NoError(t, err)
	dls, err := m.DeadLetters("a")
	require.NoError(t, err)
	before := errors.Is(dls[0].Cause, worklease.ErrLeaseExpired)
	m, _ = r2Restart(t, m, j, false, worklease.WithClock(clk))
	dls, err = m.DeadLetters("a")
	require.NoError(t, err)
	after := errors.Is(dls[0].Cause, worklease.ErrLeaseExpired)
	require.Equal(t, before, after, "errors.Is(cause, ErrLeaseExpired) before the restart: %v, after: %v", before, after)
}

// SucceedNext and FailNext (with parking, TTL, LIFO) across restarts, with
// and without snapshots: every state reads the same.
func TestRestartHandoffAcrossRestart(t *testing.T) {
	for _, snap := range []bool{false, true} {
		for _, lifo := range []bool{false, true} {
			t.Run(fmt.Sprint("snapshot=", snap, ",lifo=", lifo), func(t *testing.T) {
				clk := clock.NewFake(epoch)
				opts := []worklease.Option{worklease.WithClock(clk), worklease.WithMaxRetries(1), worklease.WithLeaseTTL(time.Minute), worklease.WithParkOnDeadLetter()}
				if lifo {
					opts = append(opts, worklease.WithOrdering(worklease.LIFO))
				}
				j := &memjournal.Journal{}
				m, err := worklease.New(append([]worklease.Option{worklease.WithJournal(j)}, opts...)...)
				require.NoError(t, err)
				r := acquire(t, m, "a", 1, worklease.Acquired)
				for o := int64(2); o < 6; o++ {
					acquire(t, m, "a", o, worklease.Enqueued)
				}
				tok := r.Token
				step := func(i int) {
					info, err := m.Inspect("a")
					require.NoError(t, err)
					if !info.Leased {
						_, err := m.Resume("a")
						require.NoError(t, err)
						info, err = m.Inspect("a")
						require.NoError(t, err)
						if !info.Leased && len(info.Backlog) > 0 {
							res, err := m.TryAcquire("a", info.Backlog[0])
							require.NoError(t, err)
							tok = res.Token
						}
						return
					}
					tok = info.Lease.Token
					clk.Advance(time.Second)
					if i%3 == 0 {
						res, err := m.SucceedNext("a", tok)
						require.NoError(t, err)
						tok = res.Lease.Token
					} else {
						res, err := m.FailNext("a", tok, errR2)
						require.NoError(t, err)
						tok = res.Lease.Token
					}
				}
				for i := 0; i < 12; i++ {
					step(i)
					before := r2Dump(t, m)
					m, j = r2Restart(t, m, j, snap && i%2 == 0, opts...)
					require.Equal(t, before, r2Dump(t, m), "step %d", i)
				}
			})
		}
	}
}

// A domain whose restored lease ends, then is forgotten and used again,
// keeps its fences above the old ones across restarts and snapshots.
func TestRestartForgetRestoredDomainFences(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshot=", snap), func(t *testing.T) {
			clk := clock.NewFake(epoch)
			j := &memjournal.Journal{}
			m, err := worklease.New(worklease.WithJournal(j), worklease.WithClock(clk))
			require.NoError(t, err)
			r1 := acquire(t, m, "a", 1, worklease.Acquired)
			m, j = r2Restart(t, m, j, snap, worklease.WithClock(clk))
			_, err = m.Succeed("a", r1.Token)
			require.NoError(t, err)
			require.NoError(t, m.Forget("a"))
			m, j = r2Restart(t, m, j, snap, worklease.WithClock(clk))
			r2 := acquire(t, m, "a", 2, worklease.Acquired)
			require.Greater(t, r2.Token.Fence(), r1.Token.Fence())
			before := r2Dump(t, m)
			m, _ = r2Restart(t, m, j, !snap, worklease.WithClock(clk))
			require.Equal(t, before, r2Dump(t, m))
			r3, err := m.SucceedNext("a", r2.Token)
			require.NoError(t, err)
			require.Equal(t, worklease.NoBacklog, r3.Status)
			r4 := acquire(t, m, "a", 1, worklease.Acquired) // forgotten: 1 is new again
			require.Greater(t, r4.Token.Fence(), r2.Token.Fence())
		})
	}
}
