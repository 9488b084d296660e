package worklease

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The binary forms of a Record and of a Manager snapshot. Both are part of
// the on-disk format of journals: change them only by adding a new version.
//
// Integers are varints (encoding/binary); a string is its length then its
// bytes; a time is a flag byte (0: the zero time), then Unix seconds and
// nanoseconds, so every time.Time the Manager can hold round-trips in UTC.

// recordVersion is the first byte of every encoded Record.
const recordVersion = 1

// maxStringLen caps a decoded string, so that a corrupt length can never make
// a decoder allocate much more than its input holds.
const maxStringLen = 1 << 20

// errShort is returned when an encoded value ends early.
var errShort = errors.New("truncated")

// AppendBinary appends the record's binary form to b. It implements
// encoding.BinaryAppender and never fails.
func (r Record) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, recordVersion, byte(r.Kind))
	b = appendString(b, r.Domain)
	b = binary.AppendVarint(b, r.Offset)
	b = binary.AppendUvarint(b, uint64(r.Attempt))
	b = appendToken(b, r.Token)
	b = appendString(b, r.Cause)
	b = appendTime(b, r.At)
	b = appendTime(b, r.AcquiredAt)
	b = binary.AppendUvarint(b, uint64(r.Retries))
	b = appendTime(b, r.ExpiresAt)
	b = appendBool(b, r.Front)
	return binary.AppendUvarint(b, r.Fence), nil
}

// MarshalBinary returns the record's binary form.
func (r Record) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// UnmarshalBinary decodes a record's binary form. It returns an error for
// anything AppendBinary cannot have produced, and never panics.
func (r *Record) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	if v := d.byte(); v != recordVersion && d.err == nil {
		return fmt.Errorf("record: unknown version %d", v)
	}
	var out Record
	out.Kind = EventKind(d.byte())
	out.Domain = d.string()
	out.Offset = d.varint()
	out.Attempt = d.int()
	out.Token = d.token()
	out.Cause = d.string()
	out.At = d.time()
	out.AcquiredAt = d.time()
	out.Retries = d.int()
	out.ExpiresAt = d.time()
	out.Front = d.bool()
	out.Fence = d.uvarint()
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("record: %w", d.err)
	}
	if out.Kind == 0 || int(out.Kind) >= numEventKinds {
		return fmt.Errorf("record: unknown kind %d", out.Kind)
	}
	*r = out
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendToken(b []byte, t Token) []byte {
	b = binary.AppendUvarint(b, t.fence)
	b = binary.AppendUvarint(b, t.domain)
	return binary.AppendUvarint(b, t.instance)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// decoder reads the binary forms. The first error sticks: later reads return
// zero values, so callers check err once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a non-negative int.
func (d *decoder) int() int {
	v := d.uvarint()
	if v > math.MaxInt32 {
		d.fail(fmt.Errorf("count %d out of range", v))
		return 0
	}
	return int(v)
}

// count reads a number of items each at least minSize bytes long, and
// rejects one the remaining input cannot hold.
func (d *decoder) count(minSize int) int {
	n := d.int()
	if n > len(d.b)/minSize {
		d.fail(fmt.Errorf("count %d exceeds what %d bytes can hold", n, len(d.b)))
		return 0
	}
	return n
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > maxStringLen || n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("string of %d bytes: %w", n, errShort))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) token() Token {
	return Token{fence: d.uvarint(), domain: d.uvarint(), instance: d.uvarint()}
}

// instant reads a time as an instant.
func (d *decoder) instant() instant { return instantOf(d.time()) }

func (d *decoder) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec := d.varint()
		nsec := d.uvarint()
		if nsec >= 1e9 {
			d.fail(fmt.Errorf("nanoseconds %d out of range", nsec))
			return time.Time{}
		}
		return time.Unix(sec, int64(nsec)).UTC()
	default:
		d.fail(errors.New("bad time flag"))
		return time.Time{}
	}
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(errors.New("bad bool"))
		return false
	}
}
