package worklease_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/memjournal"
)

// FuzzRecordDecode checks that no bytes make Record.UnmarshalBinary panic,
// that whatever it accepts encodes to bytes that decode to the same record,
// and that it accepts only the bytes AppendBinary writes from version 2 on.
func FuzzRecordDecode(f *testing.F) {
	for _, c := range codecCases {
		f.Add(unhex(f, c.v2))
		f.Add(unhex(f, c.v1))
	}
	f.Add(unhex(f, "028000018010")) // a RecordSettings record
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec worklease.Record
		if err := rec.UnmarshalBinary(data); err != nil {
			return
		}
		back, err := rec.MarshalBinary()
		require.NoError(t, err)
		if data[0] != 1 { // version 1 decodes, but is no longer written
			require.Equal(t, data, back)
		}
		var again worklease.Record
		require.NoError(t, again.UnmarshalBinary(back))
		require.Equal(t, rec, again)
	})
}

// FuzzSnapshotRestore checks that no snapshot bytes make New panic, with
// or without WithMonotonicOffsets: it either refuses them with ErrReplay or
// restores state that passes every invariant.
func FuzzSnapshotRestore(f *testing.F) {
	for _, monotonic := range []bool{false, true} {
		opts := []worklease.Option{worklease.WithLeaseTTL(time.Minute), worklease.WithOrdering(worklease.LIFO)}
		if monotonic {
			opts = append(opts, worklease.WithMonotonicOffsets())
		}
		j := &memjournal.Journal{}
		m, err := worklease.New(append(opts, worklease.WithJournal(j))...)
		require.NoError(f, err)
		res, err := m.TryAcquire("a", 1)
		require.NoError(f, err)
		_, err = m.TryAcquire("a", 2)
		require.NoError(f, err)
		_, err = m.TryAcquire("a", 3)
		require.NoError(f, err)
		_, err = m.Fail("a", res.Token, nil)
		require.NoError(f, err)
		_, err = m.Succeed("a", res.Token)
		require.NoError(f, err)
		res, err = m.TryAcquire("a", 3) // LIFO: 3 before 2
		require.NoError(f, err)
		_, err = m.Succeed("a", res.Token) // with the option, 2 is queued below hw
		require.NoError(f, err)
		_, err = m.TryAcquire("b", 5)
		require.NoError(f, err)
		_, err = m.Kill("b", 5, "poison")
		require.NoError(f, err)
		require.NoError(f, m.Pause("c"))
		var buf bytes.Buffer
		require.NoError(f, worklease.EncodeSnapshot(m, &buf))
		require.NoError(f, m.Close())
		f.Add(buf.Bytes())
	}
	f.Add([]byte("wlsnap\x01\x02\x00\x00\x00\x00"))
	f.Add([]byte("wlsnap\x02\x01\x02\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range [][]worklease.Option{nil, {worklease.WithMonotonicOffsets()}} {
			m, err := worklease.New(append(opts, worklease.WithJournal(&recordsJournal{snapshot: data}))...)
			if err != nil {
				require.ErrorIs(t, err, worklease.ErrReplay)
				continue
			}
			require.NoError(t, worklease.CheckInvariants(m))
			require.NoError(t, m.Close())
		}
	})
}
