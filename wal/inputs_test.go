package wal_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// One oversized input must not fail a journaled Manager for every domain: a
// megabyte Fail cause or Kill reason is cut to MaxCauseLen and journaled, a
// megabyte domain is refused with ErrInvalidDomain, and other domains go on.
// The dead letters read the same after a restart.
func TestOversizedInputsKeepJournal(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("E", 1<<20)
	for _, mode := range []wal.SyncMode{wal.SyncAlways, wal.SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			open := func() *worklease.Manager {
				j, err := wal.Open(dir, wal.WithSyncMode(mode), wal.WithMaxRecordSize(wal.MinMaxRecordSize))
				require.NoError(t, err)
				m, err := worklease.New(worklease.WithJournal(j), worklease.WithMaxRetries(0))
				require.NoError(t, err)
				return m
			}
			m := open()
			a := mustAcquired(t, m, "a", 1)
			b := mustAcquired(t, m, "b", 1)
			res, err := m.Fail("a", a, errors.New(huge))
			require.NoError(t, err)
			assert.Equal(t, worklease.GiveUpNoBacklog, res.Status)
			_, err = m.Succeed("b", b)
			require.NoError(t, err, "an unrelated domain goes on")
			_, err = m.Kill("c", 1, huge)
			require.NoError(t, err)
			for _, d := range []string{huge, huge[:1_048_551]} {
				_, err = m.TryAcquire(d, 1)
				require.ErrorIs(t, err, worklease.ErrInvalidDomain)
				require.ErrorIs(t, m.Pause(d), worklease.ErrInvalidDomain)
			}
			mustAcquired(t, m, "b", 2)

			check := func(m *worklease.Manager) {
				t.Helper()
				dls, err := m.DeadLetters("")
				require.NoError(t, err)
				require.Len(t, dls, 2)
				for _, dl := range dls {
					assert.Equal(t, huge[:worklease.MaxCauseLen], dl.Cause.Error(), dl.Domain)
				}
			}
			check(m)
			require.NoError(t, m.Close())
			m = open()
			check(m)
			require.NoError(t, m.Close())
		})
	}
}

// A journal written before domains were bounded may hold domains no call
// accepts now: one longer than MaxDomainLen, paused with a queued offset
// (the grant of which failed the Manager on every restart), one leased with
// an expiry, and the empty domain. It opens and replays; every call on
// those domains returns ErrInvalidDomain and changes nothing; Reap leaves
// the long domain's expired lease alone, as its records could exceed what
// the journal takes; other domains work; a snapshot keeps them all.
func TestJournalWithUnboundedDomains(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	huge := strings.Repeat("h", 1_048_551) // its grant record would not fit in a megabyte
	long := strings.Repeat("l", 9000)      // its records fit in a megabyte, not in MinMaxRecordSize
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok, err := worklease.ParseToken("1-1-7928c5c3a1d3c61a")
	require.NoError(t, err)

	// What the Manager wrote then, in today's encoding.
	l, err := wal.Open(dir)
	require.NoError(t, err)
	for _, rec := range []worklease.Record{
		{Kind: worklease.EventPaused, Domain: huge, Offset: -1},
		{Kind: worklease.EventEnqueued, Domain: huge, Offset: 1},
		{Kind: worklease.EventAcquired, Domain: long, Offset: 1, Attempt: 1, Token: tok, At: t0, AcquiredAt: t0, ExpiresAt: t0.Add(time.Minute)},
		{Kind: worklease.EventPaused, Domain: "", Offset: -1},
		{Kind: worklease.EventEnqueued, Domain: "", Offset: 3},
	} {
		payload, err := rec.MarshalBinary()
		require.NoError(t, err)
		seq, err := l.Append(wal.RecordKind, payload)
		require.NoError(t, err)
		require.NoError(t, l.Wait(seq))
	}
	require.NoError(t, l.Close())

	open := func() *worklease.Manager {
		j, err := wal.Open(dir, wal.WithMaxRecordSize(wal.MinMaxRecordSize))
		require.NoError(t, err)
		m, err := worklease.New(worklease.WithJournal(j), worklease.WithLeaseTTL(time.Minute),
			worklease.WithClock(fixedClock(t0.Add(time.Hour))))
		require.NoError(t, err)
		return m
	}
	check := func(m *worklease.Manager, off int64) {
		t.Helper()
		domains, err := m.Domains()
		require.NoError(t, err)
		domains = slices.DeleteFunc(domains, func(d string) bool { return d == "ok" })
		require.Len(t, domains, 3)
		assert.True(t, domains[0] == "" && domains[1] == huge && domains[2] == long, "domains of %d, %d and %d bytes",
			len(domains[0]), len(domains[1]), len(domains[2]))
		for _, d := range []string{huge, long, ""} {
			_, err = m.TryAcquire(d, 1)
			require.ErrorIs(t, err, worklease.ErrInvalidDomain)
			_, err = m.Resume(d)
			require.ErrorIs(t, err, worklease.ErrInvalidDomain)
			_, err = m.Inspect(d)
			require.ErrorIs(t, err, worklease.ErrInvalidDomain)
			_, err = m.Succeed(d, tok)
			require.ErrorIs(t, err, worklease.ErrInvalidDomain)
			require.ErrorIs(t, m.Forget(d), worklease.ErrInvalidDomain)
		}
		expired, err := m.Reap()
		require.NoError(t, err)
		assert.Empty(t, expired)
		leases, err := m.Leases()
		require.NoError(t, err)
		require.Len(t, leases, 1)
		assert.Equal(t, long, leases[0].Domain)

		res, err := m.TryAcquire("ok", off)
		require.NoError(t, err)
		require.Equal(t, worklease.Acquired, res.Status)
		_, err = m.Succeed("ok", res.Token)
		require.NoError(t, err)
	}
	m := open()
	check(m, 1)
	require.NoError(t, m.Snapshot())
	require.NoError(t, m.Close())
	m = open()
	check(m, 2)
	require.NoError(t, m.Close())
}

// A Manager takes no payload whose record its Log would refuse: on a Log
// with the smallest record limit, the longest payload that fits with a
// domain of MaxDomainLen bytes and a key of MaxKeyLen is stored, and comes
// back after a restart; one byte more is refused with ErrPayloadTooLarge,
// storing nothing, and the Manager goes on.
func TestPayloadLimitFollowsRecordLimit(t *testing.T) {
	t.Parallel()
	for _, mode := range []wal.SyncMode{wal.SyncAlways, wal.SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			open := func() *worklease.Manager {
				j, err := wal.Open(dir, wal.WithSyncMode(mode), wal.WithMaxRecordSize(wal.MinMaxRecordSize))
				require.NoError(t, err)
				m, err := worklease.New(worklease.WithJournal(j))
				require.NoError(t, err)
				return m
			}
			m := open()
			domain := strings.Repeat("d", worklease.MaxDomainLen)
			var fits []byte
			lo, hi := 0, wal.MinMaxRecordSize // the longest payload the Manager takes is in [lo, hi)
			for i := 0; hi-lo > 1; i++ {
				n := (lo + hi) / 2
				p := make([]byte, n)
				_, err := m.Append(domain, p, worklease.AppendOptions{Key: fmt.Sprintf("%0*d", worklease.MaxKeyLen, i)})
				if err != nil {
					require.ErrorIs(t, err, worklease.ErrPayloadTooLarge)
					hi = n
					continue
				}
				fits, lo = p, n
			}
			require.Greater(t, len(fits), 3000)
			st, err := m.Enqueue("other", 1, []byte("x"))
			require.NoError(t, err)
			require.Equal(t, worklease.Enqueued, st)
			require.NoError(t, m.Close())
			m = open()
			defer m.Close()
			info, err := m.Inspect(domain)
			require.NoError(t, err)
			last := info.Backlog[len(info.Backlog)-1]
			got, err := m.Payload(domain, last)
			require.NoError(t, err)
			require.Equal(t, fits, got)
		})
	}
}
