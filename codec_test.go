package worklease_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// codecCases are records with their binary forms: version 2, which
// AppendBinary writes, and version 1, which it wrote before and which
// journals may still hold. Both forms are part of the on-disk format: a
// change that breaks these constants breaks existing journals.
var codecCases = func() []struct {
	name   string
	rec    worklease.Record
	v2, v1 string
} {
	at := time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)
	const instance = 0xd42f1fedcfc3e68c
	return []struct {
		name   string
		rec    worklease.Record
		v2, v1 string
	}{
		{
			name: "grant with an expiry",
			rec:  worklease.Record{Kind: worklease.EventAcquired, Domain: "tenant-7", Offset: 42, Attempt: 1, Token: worklease.RawToken(3, 1, instance), At: at, AcquiredAt: at, ExpiresAt: at.Add(time.Minute)},
			v2:   "02010874656e616e742d37542f0103018ce6c3cfed1f2fd415cd55f55172861815259ded5f728618",
			v1:   "01010874656e616e742d37540103018ccd8ffedcfdc797d401000180e4ad950d959aef3a0180e4ad950d959aef3a0001f8e4ad950d959aef3a0000",
		},
		{
			name: "success without a time",
			rec:  worklease.Record{Kind: worklease.EventProcessed, Domain: "tenant-7", Offset: 42, Attempt: 1, Token: worklease.RawToken(3, 1, instance)},
			v2:   "02030874656e616e742d3754030103018ce6c3cfed1f2fd4",
			v1:   "01030874656e616e742d37540103018ccd8ffedcfdc797d40100000000000000",
		},
		{
			name: "requeue keeping its first grant",
			rec:  worklease.Record{Kind: worklease.EventRequeued, Domain: "q", Offset: 5, Attempt: 3, At: at.Add(time.Second), AcquiredAt: at, Retries: 2},
			v2:   "020701710a55031597f0305272861815cd55f55172861802",
			v1:   "010701710a03000000000182e4ad950d959aef3a0180e4ad950d959aef3a02000000",
		},
		{
			name: "dead letter",
			rec:  worklease.Record{Kind: worklease.EventDeadLettered, Domain: "a", Offset: 7, Attempt: 4, Cause: "boom", At: at},
			v2:   "020501610e85010415cd55f55172861804626f6f6d",
			v1:   "010501610e0400000004626f6f6d0180e4ad950d959aef3a0000000000",
		},
		{
			name: "enqueue at the front",
			rec:  worklease.Record{Kind: worklease.EventEnqueued, Domain: "", Offset: 0, Front: true},
			v2:   "020200008002",
			v1:   "010200000000000000000000000100",
		},
		{
			name: "forget",
			rec:  worklease.Record{Kind: worklease.EventForgotten, Domain: "gone", Offset: -1, Fence: 12},
			v2:   "021004676f6e650180040c",
			v1:   "011004676f6e6501000000000000000000000c",
		},
		{
			name: "expiry past 2262, so wide times",
			rec:  worklease.Record{Kind: worklease.EventExtended, Domain: "far", Offset: 9, Attempt: 1, Token: worklease.RawToken(5, 2, instance), At: at, ExpiresAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
			v2:   "02080366617212a7080105028ce6c3cfed1f2fd480e4ad950d959aef3a80b0f695f20100",
			v1:   "010803666172120105028ccd8ffedcfdc797d401000180e4ad950d959aef3a00000180b0f695f201000000",
		},
	}
}()

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// TestRecordBinaryForm pins the version 2 form AppendBinary writes, and
// checks that both versions decode to the same record.
func TestRecordBinaryForm(t *testing.T) {
	t.Parallel()
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.rec.MarshalBinary()
			require.NoError(t, err)
			assert.Equal(t, c.v2, hex.EncodeToString(b))
			assert.Less(t, len(b), len(c.v1)/2, "version 2 is shorter")
			for _, form := range []string{c.v2, c.v1} {
				var got worklease.Record
				require.NoError(t, got.UnmarshalBinary(unhex(t, form)))
				assert.Equal(t, c.rec, got)
			}
		})
	}
}

// TestRecordDecodeRejects checks that version 2 bytes AppendBinary cannot
// have written are refused, each for its reason: a record that decodes
// must encode back to the same bytes.
func TestRecordDecodeRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, hex, err string }{
		{"unknown version", "040200008002", "unknown version 4"},
		{"version 3 without its fields", "030200008002", "a version 3 record without the fields of version 3"},
		{"version 2 with a field of version 3", "02020000808002" + "0474656e74", "field bits 0x8000 in a version 2 record"},
		{"unknown field bit", "02020000800a", "field bits 0x500, but the fields make 0x100"},
		{"attempt written as zero", "020200000100", "field bits 0x1, but the fields make 0x0"},
		{"token written as zero", "0202000002" + "0000" + "0000000000000000", "field bits 0x2, but the fields make 0x0"},
		{"cause written empty", "02020000800100", "field bits 0x80, but the fields make 0x0"},
		{"fence written as zero", "021004676f6e650180" + "0400", "field bits 0x200, but the fields make 0x0"},
		{"acquired at written although it equals at", "0201000014" + "15cd55f551728618" + "15cd55f551728618", "field bits 0x14, but the fields make 0xc"},
		{"acquired at equals an at that is not there", "0201000008", "field bits 0x8, but the fields make 0x0"},
		{"both forms of acquired at", "020100001c" + "15cd55f551728618" + "15cd55f551728618", "field bits 0x1c, but the fields make 0xc"},
		{"zero time written", "020100008408" + "ffdb8ff9ce03" + "00", "field bits 0x404, but the fields make 0x0"},
		{"wide times that fit in nanoseconds", "020100008408" + "80e4ad950d" + "959aef3a", "field bits 0x404, but the fields make 0x4"},
		{"nanoseconds out of range", "020100008408" + "00" + "8094ebdc03", "nanoseconds 1000000000 out of range"},
		{"varint longer than it needs", "0202008000" + "8002", "bad varint"},
		{"byte after the record", "02020000800200", "1 bytes after the record"},
		{"truncated", "02010874656e616e742d37542f0103018ce6c3cfed1f2fd415cd55f55172861815259ded5f7286", "truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec worklease.Record
			assert.ErrorContains(t, rec.UnmarshalBinary(unhex(t, c.hex)), c.err)
		})
	}
}

// TestSettingsRecordBinaryForm pins a RecordSettings record's form, which
// only version 2 has: version 1 records never held the kind.
func TestSettingsRecordBinaryForm(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rec worklease.Record
		hex string
	}{
		{worklease.Record{Kind: worklease.RecordSettings, Offset: -1, Monotonic: true}, "028000018010"},
		{worklease.Record{Kind: worklease.RecordSettings, Offset: -1}, "0280000100"},
	} {
		b, err := c.rec.MarshalBinary()
		require.NoError(t, err)
		assert.Equal(t, c.hex, hex.EncodeToString(b))
		var got worklease.Record
		require.NoError(t, got.UnmarshalBinary(b))
		assert.Equal(t, c.rec, got)
	}
	assert.Equal(t, "Settings", worklease.RecordSettings.String())
	var rec worklease.Record
	assert.ErrorContains(t, rec.UnmarshalBinary(unhex(t, "018000010000000000000000000000")), "unknown kind 128")
	assert.ErrorContains(t, rec.UnmarshalBinary(unhex(t, "0281000100")), "unknown kind 129")
	// A worker pool's events are no transitions: no journal holds them.
	assert.ErrorContains(t, rec.UnmarshalBinary(unhex(t, "0212000100")), "unknown kind 18")
	assert.ErrorContains(t, rec.UnmarshalBinary(unhex(t, "0213000100")), "unknown kind 19")
}
