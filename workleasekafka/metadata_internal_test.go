package workleasekafka

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		committed int64
		spans     []span
	}{
		{"one", 10, []span{{12, 13}}},
		{"adjacent to the commit", 10, []span{{10, 15}}},
		{"several", 0, []span{{1, 2}, {5, 9}, {100, 1000}}},
		{"far", 1 << 40, []span{{1<<40 + 7, 1<<40 + 8}, {1 << 50, 1<<50 + 1}}},
		{"at the end", 5, []span{{math.MaxInt64 - 1, math.MaxInt64}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			meta := encodeMetadata(tc.committed, tc.spans)
			require.True(t, strings.HasPrefix(meta, metadataPrefix), meta)
			assert.Equal(t, tc.spans, decodeMetadata(meta, tc.committed))
		})
	}
	assert.Empty(t, encodeMetadata(3, nil), "nothing finished above the commit: no metadata")
}

// A frozen encoding: a Consumer reads commits that other versions wrote.
func TestMetadataFormatIsFrozen(t *testing.T) {
	t.Parallel()
	const meta = "wlk1:AgEDBA" // spans 12 and 16-19 above a commit at 10
	assert.Equal(t, meta, encodeMetadata(10, []span{{12, 13}, {16, 20}}))
	assert.Equal(t, []span{{12, 13}, {16, 20}}, decodeMetadata(meta, 10))
}

// Too many spans for MaxMetadataLen: the lowest that fit are kept.
func TestMetadataCut(t *testing.T) {
	t.Parallel()
	var spans []span
	for i := range int64(10_000) {
		spans = append(spans, span{2*i + 1, 2*i + 2}) // every other offset
	}
	meta := encodeMetadata(0, spans)
	require.LessOrEqual(t, len(meta), MaxMetadataLen)
	got := decodeMetadata(meta, 0)
	require.NotEmpty(t, got)
	require.Less(t, len(got), len(spans))
	assert.Equal(t, spans[:len(got)], got)
}

// Metadata of another format, or damaged, says nothing is finished.
func TestMetadataForeign(t *testing.T) {
	t.Parallel()
	for _, meta := range []string{
		"", "hello", "wlk1", "wlk1:", "wlk1:!!!", "wlk2:AgE",
		"wlk1:Ag",  // a gap without a length
		"wlk1:AgA", // a span of no offsets
		"wlk1:" + strings.Repeat("A", MaxMetadataLen+1),
		"wlk1:__________8B", // a gap past the largest offset
	} {
		assert.Empty(t, decodeMetadata(meta, 10), "%q", meta)
	}
	assert.Empty(t, decodeMetadata("wlk1:AgE", -1), "no commit")
}

func FuzzDecodeMetadata(f *testing.F) {
	f.Add("wlk1:AgEDBA", int64(10))
	f.Add("wlk1:__________8B", int64(0))
	f.Add("x", int64(-1))
	f.Fuzz(func(t *testing.T, meta string, committed int64) {
		spans := decodeMetadata(meta, committed)
		prev := committed
		for _, s := range spans {
			if s.from < prev || s.to <= s.from {
				t.Fatalf("spans out of order: %v above %d", spans, committed)
			}
			prev = s.to
		}
		if spans != nil {
			if again := decodeMetadata(encodeMetadata(committed, spans), committed); len(again) != len(spans) {
				t.Fatalf("round trip: %v, then %v", spans, again)
			}
		}
	})
}
