package workleasekafka

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"
)

// MaxMetadataLen is the most bytes of commit metadata a Consumer writes
// (see WithCommitMetadata): within Kafka's default limit,
// offset.metadata.max.bytes = 4096.
const MaxMetadataLen = 4000

// The commit metadata's format, part of what a Consumer reads back from
// commits that other versions wrote: never change it; a new format gets a
// new prefix.
//
//	"wlk1:" base64url-without-padding( { uvarint(gap) uvarint(length) }... )
//
// Each pair is a span of finished offsets: it begins gap offsets after the
// end of the span before (after the committed offset, for the first) and
// holds length offsets, length >= 1.
const metadataPrefix = "wlk1:"

// A span is the offsets from from to to, to excluded.
type span struct{ from, to int64 }

// metadataBudget is how many bytes of pairs fit in MaxMetadataLen once
// encoded.
const metadataBudget = (MaxMetadataLen - len(metadataPrefix)) / 4 * 3

// encodeMetadata returns the metadata of a commit at offset committed that
// says spans, which are in order, above committed and apart, are
// finished: as many of the lowest spans as fit, and "" if there are none.
func encodeMetadata(committed int64, spans []span) string {
	var buf []byte
	prev := committed
	for _, s := range spans {
		n := len(buf)
		buf = binary.AppendUvarint(buf, uint64(s.from-prev))
		buf = binary.AppendUvarint(buf, uint64(s.to-s.from))
		if len(buf) > metadataBudget {
			buf = buf[:n]
			break
		}
		prev = s.to
	}
	if len(buf) == 0 {
		return ""
	}
	return metadataPrefix + base64.RawURLEncoding.EncodeToString(buf)
}

// decodeMetadata returns the spans that metadata of a commit at offset
// committed says are finished, or nil if the metadata is not of this
// format or does not parse: a commit without it runs every record above
// committed again, which is always safe.
func decodeMetadata(metadata string, committed int64) []span {
	enc, ok := strings.CutPrefix(metadata, metadataPrefix)
	if !ok || committed < 0 || len(enc) > MaxMetadataLen {
		return nil
	}
	buf, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil
	}
	var spans []span
	prev := committed
	for len(buf) > 0 {
		gap, n := binary.Uvarint(buf)
		if n <= 0 {
			return nil
		}
		buf = buf[n:]
		length, n := binary.Uvarint(buf)
		if n <= 0 || length == 0 {
			return nil
		}
		buf = buf[n:]
		if gap > uint64(math.MaxInt64-prev) || length > uint64(math.MaxInt64-prev-int64(gap)) {
			return nil
		}
		from := prev + int64(gap)
		spans = append(spans, span{from, from + int64(length)})
		prev = from + int64(length)
	}
	return spans
}
