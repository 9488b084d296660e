package worklease_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

// domainDump is everything the Manager holds for one domain, for comparing
// a Manager with the one rebuilt from its journal: its processed set as
// stored (runs) and which of the offsets below dumpOffsets count as
// processed, which with WithMonotonicOffsets is more than the runs say.
type domainDump struct {
	Info        worklease.DomainInfo
	Processed   [][2]int64
	Failed      []int64
	Counts      []bool
	DeadLetters []string
}

const dumpOffsets = 8

func dumpDomains(t require.TestingT, m *worklease.Manager, domains []string) map[string]domainDump {
	out := map[string]domainDump{}
	for _, d := range domains {
		info, err := m.Inspect(d)
		require.NoError(t, err)
		p, f := worklease.TerminalRuns(m, d)
		var counts []bool
		for off := range int64(dumpOffsets) {
			counts = append(counts, worklease.CountsProcessed(m, d, off))
		}
		dls, err := m.DeadLetters(d)
		require.NoError(t, err)
		var letters []string
		for _, dl := range dls {
			letters = append(letters, fmt.Sprintf("%d %d %v %v", dl.Offset, dl.Attempts, dl.At.UTC(), dl.Cause))
		}
		out[d] = domainDump{info, p, f, counts, letters}
	}
	return out
}

// TestJournalReplayProperty runs random operations on a journaled Manager,
// restarting it now and then (closing it and building a new one on the same
// journal), and checks that every restart rebuilds exactly the state that
// was acknowledged, that fences never go backwards, and that tokens issued
// after a restart are new. Some restarts switch WithMonotonicOffsets: the
// offsets that counted as processed stay so when it goes off (if the
// Manager that had it on journaled anything: until then, the journal still
// reads as it did before), and later restarts replay across the switch to
// the state the Manager had.
func TestJournalReplayProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		opts := []worklease.Option{
			worklease.WithClock(clk),
			worklease.WithMaxRetries(rapid.IntRange(0, 2).Draw(t, "maxRetries")),
		}
		const ttl = 10 * time.Second
		withTTL := rapid.Bool().Draw(t, "ttl")
		if rapid.Bool().Draw(t, "lifo") {
			opts = append(opts, worklease.WithOrdering(worklease.LIFO))
		}
		if rapid.Bool().Draw(t, "bestEffort") {
			opts = append(opts, worklease.WithBestEffortOrdering())
		}
		if rapid.Bool().Draw(t, "park") {
			opts = append(opts, worklease.WithParkOnDeadLetter())
		}
		monotonic := rapid.Bool().Draw(t, "monotonic")
		j := &memjournal.Journal{}
		open := func() *worklease.Manager {
			o := append(slices.Clone(opts), worklease.WithJournal(j.Reopen()))
			if withTTL {
				o = append(o, worklease.WithLeaseTTL(ttl))
			}
			if monotonic {
				o = append(o, worklease.WithMonotonicOffsets())
			}
			m, err := worklease.New(o...)
			require.NoError(t, err)
			return m
		}
		m := open()
		defer func() { _ = m.Close() }()
		snapshots := 0 // j.Snapshots() when m was opened

		domains := []string{"a", "b"} // few domains and offsets, so that operations collide
		domain := rapid.SampledFrom(domains)
		offset := rapid.Int64Range(0, 3)
		fences := map[string]uint64{} // highest fence seen per domain
		tokens := map[worklease.Token]bool{}
		token := func(t *rapid.T, d string) worklease.Token {
			info, err := m.Inspect(d)
			require.NoError(t, err)
			if info.Leased && rapid.IntRange(0, 9).Draw(t, "stale") > 0 {
				return info.Lease.Token
			}
			return worklease.Token{}
		}
		// granted checks the token of a new lease in d.
		granted := func(t *rapid.T, d string, tok worklease.Token) {
			require.Greater(t, tok.Fence(), fences[d], "fences never go backwards")
			require.False(t, tokens[tok], "a token is never issued twice")
			fences[d], tokens[tok] = tok.Fence(), true
		}
		t.Repeat(map[string]func(*rapid.T){
			"TryAcquire": func(t *rapid.T) {
				d := domain.Draw(t, "d")
				res, err := m.TryAcquire(d, offset.Draw(t, "offset"))
				if err != nil {
					require.ErrorIs(t, err, worklease.ErrBacklogOrder)
					return
				}
				if res.Status == worklease.Acquired {
					granted(t, d, res.Token)
				}
			},
			"Succeed": func(t *rapid.T) {
				d := domain.Draw(t, "d")
				_, _ = m.Succeed(d, token(t, d))
			},
			"Fail": func(t *rapid.T) {
				d := domain.Draw(t, "d")
				_, _ = m.Fail(d, token(t, d), errors.New(rapid.SampledFrom([]string{"boom", "bad input", ""}).Draw(t, "cause")))
			},
			"SucceedNext": func(t *rapid.T) {
				d := domain.Draw(t, "d")
				res, err := m.SucceedNext(d, token(t, d))
				if err == nil && res.Status == worklease.NextAcquired {
					granted(t, d, res.Lease.Token)
				}
			},
			"FailNext": func(t *rapid.T) {
				d := domain.Draw(t, "d")
				res, err := m.FailNext(d, token(t, d), errors.New("boom"))
				if err == nil && res.Status == worklease.GiveUpNextAcquired {
					granted(t, d, res.Lease.Token)
				}
			},
			"Extend": func(t *rapid.T) {
				d := domain.Draw(t, "d")
				_, _ = m.Extend(d, token(t, d), time.Duration(rapid.IntRange(1, 20).Draw(t, "sec"))*time.Second)
			},
			"Advance": func(t *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(0, 12).Draw(t, "sec")) * time.Second)
			},
			"Reap": func(t *rapid.T) {
				_, err := m.Reap()
				require.NoError(t, err)
			},
			"Kill": func(t *rapid.T) {
				_, _ = m.Kill(domain.Draw(t, "d"), offset.Draw(t, "offset"), rapid.SampledFrom([]string{"operator", ""}).Draw(t, "reason"))
			},
			"Redrive": func(t *rapid.T) {
				_, _ = m.Redrive(domain.Draw(t, "d"), offset.Draw(t, "offset"))
			},
			"ForceRelease": func(t *rapid.T) {
				_, _ = m.ForceRelease(domain.Draw(t, "d"))
			},
			"PauseResume": func(t *rapid.T) {
				d := domain.Draw(t, "d")
				if rapid.Bool().Draw(t, "pause") {
					require.NoError(t, m.Pause(d))
				} else {
					_, err := m.Resume(d)
					require.NoError(t, err)
				}
			},
			"Forget": func(t *rapid.T) {
				_ = m.Forget(domain.Draw(t, "d"))
			},
			"Snapshot": func(t *rapid.T) {
				require.NoError(t, m.Snapshot())
			},
			"Restart": func(t *rapid.T) {
				before := dumpDomains(t, m, domains)
				require.NoError(t, m.Close())
				m = open()
				snapshots = j.Snapshots()
				require.Equal(t, before, dumpDomains(t, m, domains), "the restarted Manager holds what was acknowledged")
			},
			// A restart with WithLeaseTTL switched: a lease keeps its
			// expiry, and one without gets a TTL from now.
			"RestartOtherTTL": func(t *rapid.T) {
				want := dumpDomains(t, m, domains)
				require.NoError(t, m.Close())
				withTTL = !withTTL
				for d, dump := range want {
					if withTTL && dump.Info.Leased && dump.Info.Lease.ExpiresAt.IsZero() {
						dump.Info.Lease.ExpiresAt = clk.Now().Add(ttl)
						want[d] = dump
					}
				}
				m = open()
				snapshots = j.Snapshots()
				require.Equal(t, want, dumpDomains(t, m, domains), "the restarted Manager holds what was acknowledged")
			},
			"SwitchMonotonic": func(t *rapid.T) {
				before := dumpDomains(t, m, domains)
				st := m.Stats()
				st.Rejected, st.OutOfOrder = 0, 0 // never journaled
				journaled := st != worklease.Stats{} || j.Snapshots() > snapshots
				require.NoError(t, m.Close())
				monotonic = !monotonic
				m = open()
				snapshots = j.Snapshots()
				after := dumpDomains(t, m, domains)
				for _, d := range domains {
					b, a := before[d], after[d]
					if !monotonic && journaled { // off: what counted as processed still does, and only that
						require.Equal(t, b.Counts, a.Counts, "%q: processed offsets", d)
						require.Equal(t, b.Info, a.Info, "%q", d)
					}
					b.Info.Processed, a.Info.Processed = 0, 0 // on: offsets up to hw now count
					require.Equal(t, b.Info, a.Info, "%q", d)
					require.Equal(t, b.Failed, a.Failed, "%q: failed", d)
					require.Equal(t, b.DeadLetters, a.DeadLetters, "%q: dead letters", d)
				}
			},
			"": func(t *rapid.T) {
				require.NoError(t, worklease.CheckInvariants(m))
			},
		})
	})
}

func TestJournalFailsClosedOnAppendError(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	res, err := m.TryAcquire("A", 1)
	require.NoError(t, err)

	j.FailAppendAt(3) // 1 is the journal's settings, 2 the grant
	_, err = m.Succeed("A", res.Token)
	require.ErrorIs(t, err, worklease.ErrJournalFailed)
	require.ErrorIs(t, err, memjournal.ErrInjected)

	// Every later call fails the same way, on any domain.
	_, err = m.TryAcquire("B", 1)
	require.ErrorIs(t, err, worklease.ErrJournalFailed)
	_, err = m.Inspect("A")
	require.ErrorIs(t, err, worklease.ErrJournalFailed)
	require.NoError(t, m.Close())

	// What was acknowledged survives; what failed was never acknowledged.
	m2, err := worklease.New(worklease.WithJournal(j.Reopen()))
	require.NoError(t, err)
	defer func() { require.NoError(t, m2.Close()) }()
	info, err := m2.Inspect("A")
	require.NoError(t, err)
	require.True(t, info.Leased)
	require.Equal(t, res.Token, info.Lease.Token, "the holder may still finish its lease after the restart")
	_, err = m2.Succeed("A", res.Token)
	require.NoError(t, err)
}

func TestJournalFailsClosedOnWaitError(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	j.FailWaits()
	_, err = m.TryAcquire("A", 1)
	require.ErrorIs(t, err, worklease.ErrJournalFailed)
	_, err = m.TryAcquire("A", 2)
	require.ErrorIs(t, err, worklease.ErrJournalFailed)
	require.NoError(t, m.Close())
}

func TestJournalSnapshotsWhenDue(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{SnapshotEvery: 50}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	for off := range int64(500) {
		res, err := m.TryAcquire(fmt.Sprint("d", off%7), off)
		require.NoError(t, err)
		_, err = m.Succeed(fmt.Sprint("d", off%7), res.Token)
		require.NoError(t, err)
	}
	require.NoError(t, m.Close()) // waits for a snapshot under way
	require.Positive(t, j.Snapshots())
	seqs, _ := j.Records()
	require.Less(t, len(seqs), 1000, "snapshots dropped the records they cover")

	m2, err := worklease.New(worklease.WithJournal(j.Reopen()))
	require.NoError(t, err)
	defer func() { require.NoError(t, m2.Close()) }()
	for d := range 7 {
		info, err := m2.Inspect(fmt.Sprint("d", d))
		require.NoError(t, err)
		require.EqualValues(t, len(rangeStep(int64(d), 500, 7)), info.Processed)
	}
}

func rangeStep(from, to, step int64) []int64 {
	var out []int64
	for x := from; x < to; x += step {
		out = append(out, x)
	}
	return out
}

// recordsJournal replays a fixed list of records.
type recordsJournal struct {
	memjournal.Journal
	snapshot []byte
	records  []worklease.Record
}

func (j *recordsJournal) ReplayRecords(restore func([]byte) error, apply func(uint64, worklease.Record) error) error {
	if j.snapshot != nil {
		if err := restore(j.snapshot); err != nil {
			return err
		}
	}
	for i, rec := range j.records {
		if err := apply(uint64(i+1), rec); err != nil {
			return err
		}
	}
	return nil
}

func (j *recordsJournal) SnapshotState(func(io.Writer) error) error { return nil }

// Replay applies every record through the checks of its kind (see
// domainState.fits); a record that does not fit the state before it is an
// error, never a guess.
func TestReplayRejectsRecordsThatBreakInvariants(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := func(fence uint64) worklease.Token { return worklease.RawToken(fence, 1, 1) }
	grant := func(off int64, fence uint64) worklease.Record {
		return worklease.Record{Kind: worklease.EventAcquired, Domain: "A", Offset: off, Attempt: 1, Token: tok(fence), AcquiredAt: at, At: at}
	}
	tests := []struct {
		name    string
		records []worklease.Record
	}{
		{"grant while leased", []worklease.Record{grant(1, 1), grant(2, 2)}},
		{"fence goes backwards", []worklease.Record{
			grant(1, 5),
			{Kind: worklease.EventProcessed, Domain: "A", Offset: 1, Token: tok(5)},
			grant(2, 5),
		}},
		{"complete without a lease", []worklease.Record{{Kind: worklease.EventProcessed, Domain: "A", Offset: 1, Token: tok(1)}}},
		{"complete with another token", []worklease.Record{grant(1, 1), {Kind: worklease.EventProcessed, Domain: "A", Offset: 1, Token: tok(2)}}},
		{"grant a processed offset", []worklease.Record{
			grant(1, 1),
			{Kind: worklease.EventProcessed, Domain: "A", Offset: 1, Token: tok(1)},
			grant(1, 2),
		}},
		{"extend to an earlier time", []worklease.Record{
			{Kind: worklease.EventAcquired, Domain: "A", Offset: 1, Attempt: 1, Token: tok(1), ExpiresAt: at.Add(time.Minute)},
			{Kind: worklease.EventExtended, Domain: "A", Offset: 1, Token: tok(1), ExpiresAt: at},
		}},
		{"expire before the expiry", []worklease.Record{
			{Kind: worklease.EventAcquired, Domain: "A", Offset: 1, Attempt: 1, Token: tok(1), ExpiresAt: at.Add(time.Minute)},
			{Kind: worklease.EventExpired, Domain: "A", Offset: 1, Token: tok(1), At: at},
		}},
		{"enqueue twice", []worklease.Record{
			grant(1, 1),
			{Kind: worklease.EventEnqueued, Domain: "A", Offset: 2},
			{Kind: worklease.EventEnqueued, Domain: "A", Offset: 2},
		}},
		{"redrive what did not fail", []worklease.Record{{Kind: worklease.EventRedriven, Domain: "A", Offset: 3}}},
		{"forget a busy domain", []worklease.Record{grant(1, 1), {Kind: worklease.EventForgotten, Domain: "A", Offset: -1, Fence: 1}}},
		{"a rejection", []worklease.Record{grant(1, 1), {Kind: worklease.EventRejected, Domain: "A", Offset: 1}}},
		{"a negative offset", []worklease.Record{grant(-4, 1)}},
		{"a grant's attempt not above its failed ones", []worklease.Record{
			{Kind: worklease.EventAcquired, Domain: "A", Offset: 1, Attempt: 1, Retries: 1, Token: tok(1)},
		}},
		{"a requeue with more failed attempts than attempts", []worklease.Record{
			{Kind: worklease.EventRequeued, Domain: "A", Offset: 1, Attempt: 1, Retries: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := worklease.New(worklease.WithJournal(&recordsJournal{records: tt.records}))
			require.ErrorIs(t, err, worklease.ErrReplay)
			require.Nil(t, m)
			var re *worklease.ReplayError
			require.ErrorAs(t, err, &re)
			require.Equal(t, uint64(len(tt.records)), re.Seq, "the last record is the bad one")
		})
	}
}

func TestReplayRejectsCorruptSnapshots(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	for off := range int64(20) {
		res, err := m.TryAcquire("A", off)
		require.NoError(t, err)
		if off%3 == 0 {
			_, err = m.Succeed("A", res.Token)
		} else {
			_, err = m.Kill("A", off, "bad")
		}
		require.NoError(t, err)
	}
	_, err = m.TryAcquire("A", 100)
	require.NoError(t, err)
	_, err = m.TryAcquire("A", 101)
	require.NoError(t, err)
	var snap []byte
	require.NoError(t, j.SnapshotState(func(w io.Writer) error {
		return worklease.EncodeSnapshot(m, w)
	}))
	require.NoError(t, m.Close())
	require.NoError(t, j.Reopen().ReplayRecords(func(b []byte) error { snap = append([]byte(nil), b...); return nil }, nil))

	// Every truncation and every single flipped byte is either rejected
	// with ErrReplay or, where it happens to stay valid, restores state
	// that passes every invariant. Nothing panics.
	for cut := range len(snap) {
		_, err := worklease.New(worklease.WithJournal(&recordsJournal{snapshot: snap[:cut]}))
		require.ErrorIs(t, err, worklease.ErrReplay, "cut at %d", cut)
	}
	for i := range snap {
		bad := append([]byte(nil), snap...)
		bad[i] ^= 0x41
		m, err := worklease.New(worklease.WithJournal(&recordsJournal{snapshot: bad}))
		if err != nil {
			require.ErrorIs(t, err, worklease.ErrReplay, "flip at %d", i)
			continue
		}
		require.NoError(t, worklease.CheckInvariants(m))
	}
}

// TestJournalRecordTimes checks which records carry a time. A grant always
// does. Succeed reads the clock only when something needs the time: with a
// TTL (replay checks the lease's expiry against it) or an observer, its
// record has one; with neither it has none.
func TestJournalRecordTimes(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []worklease.Option
		want bool // the Processed record has a time
	}{
		{"plain", nil, false},
		{"ttl", []worklease.Option{worklease.WithLeaseTTL(time.Minute)}, true},
		{"observer", []worklease.Option{worklease.WithObserver(worklease.ObserverFunc(func(worklease.Event) {}))}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := &memjournal.Journal{}
			m, clk := newManager(t, append(c.opts, worklease.WithJournal(j))...)
			res := acquire(t, m, "d", 0, worklease.Acquired)
			clk.Advance(time.Second)
			_, err := m.Succeed("d", res.Token)
			require.NoError(t, err)

			_, recs := j.Records()
			require.Len(t, recs, 3)
			require.Equal(t, worklease.Record{Kind: worklease.RecordSettings, Offset: -1}, recs[0], "no time either")
			recs = recs[1:]
			require.Equal(t, worklease.EventAcquired, recs[0].Kind)
			require.True(t, recs[0].At.Equal(epoch), "grant at %v", recs[0].At)
			require.Equal(t, worklease.EventProcessed, recs[1].Kind)
			if c.want {
				require.True(t, recs[1].At.Equal(epoch.Add(time.Second)), "processed at %v", recs[1].At)
			} else {
				require.True(t, recs[1].At.IsZero(), "processed at %v", recs[1].At)
			}
			require.NoError(t, m.Close())
		})
	}
}

// TestReplayedExpiryWithoutTTL checks that a lease journaled with an expiry
// keeps it on a restart without WithLeaseTTL: the restarted Manager reads
// the clock on every call, and revokes the lease once its time is up.
func TestReplayedExpiryWithoutTTL(t *testing.T) {
	j := &memjournal.Journal{}
	m, clk := newManager(t, worklease.WithJournal(j), worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(0))
	res := acquire(t, m, "d", 0, worklease.Acquired)
	require.NoError(t, m.Close())

	m, err := worklease.New(worklease.WithClock(clk), worklease.WithJournal(j.Reopen()), worklease.WithMaxRetries(0))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	clk.Advance(2 * time.Minute)
	_, err = m.Succeed("d", res.Token)
	require.ErrorIs(t, err, worklease.ErrLeaseExpired)
	info, err := m.Inspect("d")
	require.NoError(t, err)
	require.False(t, info.Leased)
	require.NoError(t, worklease.CheckInvariants(m))
}

// A journal serves one Manager: a second New on it is refused with
// ErrJournalInUse, and the first Manager carries on with it open.
func TestJournalSecondManagerIsRefused(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	res, err := m.TryAcquire("a", 1)
	require.NoError(t, err)
	second, err := worklease.New(worklease.WithJournal(j))
	require.ErrorIs(t, err, worklease.ErrJournalInUse)
	require.Nil(t, second)
	_, err = m.Succeed("a", res.Token)
	require.NoError(t, err, "the journal is still open")
}
