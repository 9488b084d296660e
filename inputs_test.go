package worklease_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/clock"
	"github.com/worklease/worklease/internal/memjournal"
)

// domainCalls are every call that takes a domain, made on domain with
// offset where it takes one, each returning only its error.
var domainCalls = []struct {
	name string
	call func(m *worklease.Manager, domain string, offset int64) error
}{
	{"TryAcquire", func(m *worklease.Manager, d string, off int64) error { _, err := m.TryAcquire(d, off); return err }},
	{"Succeed", func(m *worklease.Manager, d string, _ int64) error {
		_, err := m.Succeed(d, worklease.Token{})
		return err
	}},
	{"Fail", func(m *worklease.Manager, d string, _ int64) error {
		_, err := m.Fail(d, worklease.Token{}, errors.New("x"))
		return err
	}},
	{"Extend", func(m *worklease.Manager, d string, _ int64) error {
		_, err := m.Extend(d, worklease.Token{}, time.Second)
		return err
	}},
	{"Inspect", func(m *worklease.Manager, d string, _ int64) error { _, err := m.Inspect(d); return err }},
	{"Redrive", func(m *worklease.Manager, d string, off int64) error { _, err := m.Redrive(d, off); return err }},
	{"Kill", func(m *worklease.Manager, d string, off int64) error { _, err := m.Kill(d, off, "why"); return err }},
	{"ForceRelease", func(m *worklease.Manager, d string, _ int64) error { _, err := m.ForceRelease(d); return err }},
	{"Pause", func(m *worklease.Manager, d string, _ int64) error { return m.Pause(d) }},
	{"Resume", func(m *worklease.Manager, d string, _ int64) error { _, err := m.Resume(d); return err }},
	{"Forget", func(m *worklease.Manager, d string, _ int64) error { return m.Forget(d) }},
}

// Every call refuses the empty domain and one longer than MaxDomainLen with
// ErrInvalidDomain, before the offset, and changes nothing: no record, no
// event, no journal record. The error names a long domain by a prefix and
// its length.
func TestInvalidDomainRefusedEverywhere(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("d", worklease.MaxDomainLen+1)
	for _, c := range domainCalls {
		for _, domain := range []string{"", long, long + strings.Repeat("e", 1<<20)} {
			for _, offset := range []int64{1, -5} {
				j := &memjournal.Journal{}
				var events []worklease.Event
				m, err := worklease.New(worklease.WithJournal(j),
					worklease.WithObserver(worklease.ObserverFunc(func(e worklease.Event) { events = append(events, e) })))
				require.NoError(t, err)
				err = c.call(m, domain, offset)
				require.ErrorIs(t, err, worklease.ErrInvalidDomain, "%s on a domain of %d bytes", c.name, len(domain))
				require.NotErrorIs(t, err, worklease.ErrInvalidOffset, c.name)
				require.Less(t, len(err.Error()), 300, "%s: the error prints the whole domain", c.name)
				if len(domain) > 0 {
					require.Contains(t, err.Error(), "bytes", c.name)
				}
				domains, err := m.Domains()
				require.NoError(t, err)
				require.Empty(t, domains, c.name)
				require.Zero(t, m.Stats(), c.name)
				require.Empty(t, events, c.name)
				_, recs := j.Records()
				require.Empty(t, recs, "%s journaled a record", c.name)
				require.NoError(t, m.Close())
			}
		}
	}
}

// A domain of exactly MaxDomainLen bytes works like any other.
func TestLongestDomainAccepted(t *testing.T) {
	t.Parallel()
	d := strings.Repeat("é", worklease.MaxDomainLen/2) // 2 bytes each
	require.Len(t, d, worklease.MaxDomainLen)
	m, err := worklease.New(worklease.WithJournal(&memjournal.Journal{}))
	require.NoError(t, err)
	defer m.Close()
	res, err := m.TryAcquire(d, 1)
	require.NoError(t, err)
	require.Equal(t, worklease.Acquired, res.Status)
	_, err = m.Succeed(d, res.Token)
	require.NoError(t, err)
	require.NoError(t, m.Pause(d))
	_, err = m.Resume(d)
	require.NoError(t, err)
}

// A zero Manager and a nil one answer every call with an error matching
// ErrClosed instead of panicking; Stats reports zero counts.
func TestZeroAndNilManager(t *testing.T) {
	t.Parallel()
	var zero worklease.Manager
	for name, m := range map[string]*worklease.Manager{"zero": &zero, "nil": nil} {
		for _, c := range domainCalls {
			require.ErrorIs(t, c.call(m, "a", 1), worklease.ErrClosed, "%s %s", name, c.name)
		}
		_, err := m.DeadLetters("")
		require.ErrorIs(t, err, worklease.ErrClosed, name)
		_, err = m.DeadLetters("a")
		require.ErrorIs(t, err, worklease.ErrClosed, name)
		_, err = m.Leases()
		require.ErrorIs(t, err, worklease.ErrClosed, name)
		_, err = m.Domains()
		require.ErrorIs(t, err, worklease.ErrClosed, name)
		_, err = m.Reap()
		require.ErrorIs(t, err, worklease.ErrClosed, name)
		require.ErrorIs(t, m.Snapshot(), worklease.ErrClosed, name)
		require.Zero(t, m.Stats(), name)
		err = m.Close()
		require.ErrorIs(t, err, worklease.ErrClosed, name)
		require.Contains(t, err.Error(), "New", name)
	}
}

// A cause's text is cut to MaxCauseLen bytes at a UTF-8 boundary, for
// Fail's and Kill's alike; the dead letter keeps the shorter text, the same
// after a restart, and errors.Is still finds the caller's error.
func TestLongCauseTruncated(t *testing.T) {
	t.Parallel()
	// The rune that crosses MaxCauseLen is dropped whole.
	text := strings.Repeat("x", worklease.MaxCauseLen-1) + strings.Repeat("é", 1<<19)
	want := text[:worklease.MaxCauseLen-1]
	cause := errors.New(text)
	for _, journaled := range []bool{false, true} {
		j := &memjournal.Journal{}
		opts := []worklease.Option{worklease.WithMaxRetries(1)}
		if journaled {
			opts = append(opts, worklease.WithJournal(j))
		}
		m, err := worklease.New(opts...)
		require.NoError(t, err)
		res, err := m.TryAcquire("a", 1)
		require.NoError(t, err)
		_, err = m.Fail("a", res.Token, cause) // a retry
		require.NoError(t, err)
		_, err = m.Fail("a", res.Token, cause)
		require.NoError(t, err)
		_, err = m.Kill("b", 1, text)
		require.NoError(t, err)
		check := func(m *worklease.Manager, restarted bool) {
			dls, err := m.DeadLetters("")
			require.NoError(t, err)
			require.Len(t, dls, 2)
			for _, dl := range dls {
				require.Equal(t, want, dl.Cause.Error(), "%s, journaled %v, restarted %v", dl.Domain, journaled, restarted)
				require.True(t, utf8.ValidString(dl.Cause.Error()))
			}
			if !restarted {
				require.ErrorIs(t, dls[0].Cause, cause, "Fail's cause is still the caller's error")
			}
		}
		check(m, false)
		require.NoError(t, m.Close())
		if journaled {
			opts[len(opts)-1] = worklease.WithJournal(j.Reopen())
			m, err = worklease.New(opts...)
			require.NoError(t, err)
			check(m, true)
			require.NoError(t, m.Close())
		}
	}
}

// A cause whose text is empty is no cause: the dead letter's Cause is nil,
// before a restart as after it.
func TestEmptyCauseIsNoCause(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	for _, journaled := range []bool{false, true} {
		j := &memjournal.Journal{}
		opts := []worklease.Option{worklease.WithMaxRetries(0), worklease.WithClock(clk)}
		if journaled {
			opts = append(opts, worklease.WithJournal(j))
		}
		m, err := worklease.New(opts...)
		require.NoError(t, err)
		res, err := m.TryAcquire("a", 1)
		require.NoError(t, err)
		_, err = m.Fail("a", res.Token, errors.New(""))
		require.NoError(t, err)
		_, err = m.Kill("a", 2, "")
		require.NoError(t, err)
		check := func(m *worklease.Manager) {
			dls, err := m.DeadLetters("a")
			require.NoError(t, err)
			require.Len(t, dls, 2)
			for _, dl := range dls {
				require.Nil(t, dl.Cause, "offset %d, journaled %v", dl.Offset, journaled)
			}
		}
		check(m)
		require.NoError(t, m.Close())
		if journaled {
			opts[len(opts)-1] = worklease.WithJournal(j.Reopen())
			m, err = worklease.New(opts...)
			require.NoError(t, err)
			check(m)
			require.NoError(t, m.Close())
		}
	}
}

// With WithMonotonicOffsets, Kill refuses an offset above the domain's
// highest finished offset that is neither queued nor in flight: it would
// make every offset below it count as processed. It changes nothing.
func TestMonotonicKillAhead(t *testing.T) {
	t.Parallel()
	m, err := worklease.New(worklease.WithMonotonicOffsets())
	require.NoError(t, err)
	defer m.Close()

	_, err = m.Kill("k", 1000, "typo")
	require.ErrorIs(t, err, worklease.ErrOffsetAhead)
	domains, err := m.Domains()
	require.NoError(t, err)
	require.Empty(t, domains, "a refused Kill made a domain")
	require.Zero(t, m.Stats())

	res, err := m.TryAcquire("k", 2)
	require.NoError(t, err)
	_, err = m.Succeed("k", res.Token)
	require.NoError(t, err)
	before, err := m.Inspect("k")
	require.NoError(t, err)
	for _, off := range []int64{3, 1000} {
		_, err = m.Kill("k", off, "typo")
		require.ErrorIs(t, err, worklease.ErrOffsetAhead, "offset %d", off)
	}
	after, err := m.Inspect("k")
	require.NoError(t, err)
	require.Equal(t, before, after)
	res, err = m.TryAcquire("k", 999)
	require.NoError(t, err)
	require.Equal(t, worklease.Acquired, res.Status, "offsets below 1000 are still to run")

	// Queued and in-flight offsets above hw can be killed, as before.
	_, err = m.TryAcquire("k", 1005)
	require.NoError(t, err)
	_, err = m.Kill("k", 1005, "poison")
	require.NoError(t, err)
	_, err = m.Kill("k", 999, "poison")
	require.NoError(t, err)
	_, err = m.Kill("k", 1, "processed")
	require.ErrorIs(t, err, worklease.ErrAlreadyProcessed)

	// Without the option, killing an offset never seen fails it ahead.
	plain, err := worklease.New()
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Kill("k", 1000, "skip")
	require.NoError(t, err)
	res, err = plain.TryAcquire("k", 999)
	require.NoError(t, err)
	require.Equal(t, worklease.Acquired, res.Status)
}

// A journal whose Kill went ahead of a domain's offsets, as WithMonotonicOffsets
// allowed before ErrOffsetAhead, still replays with the option: the killed
// offset is the domain's highest finished one.
func TestMonotonicKillAheadReplays(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j)) // without the option, Kill of an unseen offset is allowed
	require.NoError(t, err)
	_, err = m.Kill("k", 1000, "skip")
	require.NoError(t, err)
	require.NoError(t, m.Close())

	m, err = worklease.New(worklease.WithJournal(j.Reopen()), worklease.WithMonotonicOffsets())
	require.NoError(t, err)
	defer m.Close()
	res, err := m.TryAcquire("k", 999)
	require.NoError(t, err)
	require.Equal(t, worklease.AlreadyProcessed, res.Status)
	res, err = m.TryAcquire("k", 1000)
	require.NoError(t, err)
	require.Equal(t, worklease.AlreadyFailed, res.Status)
}
