package worklease

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The binary forms of a Record and of a Manager snapshot. Both are part of
// the on-disk format of journals: change them only by adding a new version,
// and keep decoding the old ones.
//
// Integers are varints (encoding/binary); a string is its length then its
// bytes; a time is Unix seconds and nanoseconds, so every time.Time the
// Manager can hold round-trips in UTC. The snapshot's times, and version 1
// of a Record's, start with a flag byte (0: the zero time); version 2 of a
// Record's are mostly nanoseconds alone (below).

// A Record's binary form starts with its version. Version 2, the one
// AppendBinary writes, is the kind, the domain and the offset, then a
// varint of field bits saying which other fields follow, in the bits'
// order; a field that is not there is zero. A token is its fence and
// domain serial as varints, then its instance (random, so a varint would
// take 9 or 10 bytes) as 8 bytes, little-endian. A time is 8 bytes of Unix
// nanoseconds, little-endian, unless the record has a time outside the
// years 1678 to 2262, which int64 nanoseconds cannot hold: then every time
// of the record is Unix seconds and nanoseconds (fieldWideTimes). Version
// 1 wrote every field (see recordV1). The records of a cycle take about
// 30% fewer bytes in version 2, and the write-behind of a busy journal
// spends most of its time encoding and copying them.
//
// Version 3 is version 2 with three more fields, the producers' (Payload,
// NotBefore, Key), each with a bit of its own. AppendBinary writes it only
// for a record that has one of them, and version 2 for every other, byte
// for byte as before: a reader of version 2 refuses a version 3 record as
// an unknown version, rather than misread it.
const (
	recordVersion1 = 1
	recordVersion2 = 2
	recordVersion  = 3
)

// The field bits of version 2. Part of the on-disk format: never change
// one; a new field gets a new bit. Those of a cycle's records come first,
// so that their bits take one byte.
const (
	fieldAttempt        = 1 << iota // Attempt, a varint
	fieldToken                      // Token: fence and domain serial, varints, and instance
	fieldAt                         // At, a time
	fieldAcquiredAtIsAt             // AcquiredAt equals At: it is not written
	fieldAcquiredAt                 // AcquiredAt, a time
	fieldExpiresAt                  // ExpiresAt, a time
	fieldRetries                    // Retries, a varint
	fieldCause                      // Cause, a string
	fieldFront                      // Front is true; nothing is written
	fieldFence                      // Fence, a varint
	fieldWideTimes                  // the times are Unix seconds and nanoseconds
	fieldMonotonic                  // Monotonic is true; nothing is written

	// Version 3's.
	fieldNotBefore // NotBefore, a time
	fieldKey       // Key, a string
	fieldPayload   // Payload, a string, written last: it may be long

	// fieldsV2 are the bits a version 2 record may have.
	fieldsV2 = fieldNotBefore - 1

	// fieldsRare are the bits of the fields AppendBinary writes after
	// At, which the records of a lease cycle do not have: it tests them
	// only if one is set. (Not part of the format.)
	fieldsRare = fieldAcquiredAt | fieldExpiresAt | fieldRetries | fieldCause | fieldFence | fieldNotBefore | fieldKey | fieldPayload
)

// maxStringLen caps a decoded string, so that a corrupt length can never make
// a decoder allocate much more than its input holds.
const maxStringLen = 1 << 20

// errShort is returned when an encoded value ends early.
var errShort = errors.New("truncated")

// AppendBinary appends the record's binary form to b. It implements
// encoding.BinaryAppender and never fails. Its receiver is a pointer: a
// journal encodes every record the Manager writes, and a Record is too
// large to copy on each call.
func (r *Record) AppendBinary(b []byte) ([]byte, error) {
	fields := r.fields()
	version := byte(recordVersion2)
	if fields&^fieldsV2 != 0 {
		version = recordVersion
	}
	b = append(b, version, byte(r.Kind))
	b = appendString(b, r.Domain)
	b = binary.AppendVarint(b, r.Offset)
	b = binary.AppendUvarint(b, fields)
	if fields&fieldAttempt != 0 {
		b = binary.AppendUvarint(b, uint64(r.Attempt))
	}
	if fields&fieldToken != 0 {
		b = binary.AppendUvarint(b, r.Token.fence)
		b = binary.AppendUvarint(b, r.Token.serial)
		b = binary.LittleEndian.AppendUint64(b, r.Token.instance)
	}
	wide := fields&fieldWideTimes != 0
	if fields&fieldAt != 0 {
		b = appendRecordTime(b, r.At, wide)
	}
	if fields&fieldsRare == 0 {
		return b, nil // a cycle's records end here
	}
	if fields&fieldAcquiredAt != 0 {
		b = appendRecordTime(b, r.AcquiredAt, wide)
	}
	if fields&fieldExpiresAt != 0 {
		b = appendRecordTime(b, r.ExpiresAt, wide)
	}
	if fields&fieldRetries != 0 {
		b = binary.AppendUvarint(b, uint64(r.Retries))
	}
	if fields&fieldCause != 0 {
		b = appendString(b, r.Cause)
	}
	if fields&fieldFence != 0 {
		b = binary.AppendUvarint(b, r.Fence)
	}
	if fields&fieldNotBefore != 0 {
		b = appendRecordTime(b, r.NotBefore, wide)
	}
	if fields&fieldKey != 0 {
		b = appendString(b, r.Key)
	}
	if fields&fieldPayload != 0 {
		b = binary.AppendUvarint(b, uint64(len(r.Payload)))
		b = append(b, r.Payload...)
	}
	return b, nil
}

// fields returns the field bits of version 2 for r: one for each field
// that is not zero, and fieldWideTimes if a time does not fit in int64
// nanoseconds.
func (r *Record) fields() uint64 {
	var f uint64
	fits := true // every time present fits in int64 nanoseconds
	if r.Attempt != 0 {
		f |= fieldAttempt
	}
	if !r.Token.IsZero() {
		f |= fieldToken
	}
	if !r.At.IsZero() {
		f |= fieldAt
		fits = fitsNanos(r.At)
	}
	if !r.AcquiredAt.IsZero() {
		// == first: setRecord copies At into AcquiredAt for a first
		// grant, the common case, and Equal is a call.
		if r.AcquiredAt == r.At || r.AcquiredAt.Equal(r.At) {
			f |= fieldAcquiredAtIsAt
		} else {
			f |= fieldAcquiredAt
			fits = fits && fitsNanos(r.AcquiredAt)
		}
	}
	if !r.ExpiresAt.IsZero() {
		f |= fieldExpiresAt
		fits = fits && fitsNanos(r.ExpiresAt)
	}
	if r.Retries != 0 {
		f |= fieldRetries
	}
	if r.Cause != "" {
		f |= fieldCause
	}
	if r.Front {
		f |= fieldFront
	}
	if r.Fence != 0 {
		f |= fieldFence
	}
	if r.Monotonic {
		f |= fieldMonotonic
	}
	if !r.NotBefore.IsZero() {
		f |= fieldNotBefore
		fits = fits && fitsNanos(r.NotBefore)
	}
	if r.Key != "" {
		f |= fieldKey
	}
	if r.Payload != nil {
		f |= fieldPayload
	}
	if !fits {
		f |= fieldWideTimes
	}
	return f
}

// fitsNanos reports whether t, which is not zero, is a time int64 Unix
// nanoseconds can hold, as every time a Manager keeps is (see instant).
func fitsNanos(t time.Time) bool {
	if sec := t.Unix(); sec > minInstantSec && sec < maxInstantSec {
		return true
	}
	return !t.Before(minInstantTime) && !t.After(maxInstantTime)
}

// appendRecordTime appends t, which is not zero, in version 2 of a
// Record's binary form.
func appendRecordTime(b []byte, t time.Time, wide bool) []byte {
	if wide {
		return appendUnix(b, t)
	}
	return binary.LittleEndian.AppendUint64(b, uint64(t.UnixNano()))
}

// MarshalBinary returns the record's binary form.
func (r Record) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// UnmarshalBinary decodes a record's binary form, of any version. It
// returns an error for anything AppendBinary cannot have produced (in
// version 1, anything it could not have produced before version 2), and
// never panics.
func (r *Record) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	var out Record
	v := d.byte()
	switch {
	case d.err != nil:
	case v == recordVersion || v == recordVersion2:
		out = d.recordV2(v)
	case v == recordVersion1:
		out = d.recordV1()
	default:
		return fmt.Errorf("record: unknown version %d", v)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("record: %w", d.err)
	}
	if (out.Kind == 0 || int(out.Kind) >= numEventKinds) && (out.Kind != RecordSettings || v == recordVersion1) {
		return fmt.Errorf("record: unknown kind %d", out.Kind)
	}
	*r = out
	return nil
}

// recordV2 reads the rest of a version 2 or 3 record (v). Each field
// present must be non-zero, as AppendBinary leaves zero fields out, and a
// version 3 record must have one of the fields version 2 has not.
func (d *decoder) recordV2(v byte) Record {
	r := d.recordHead()
	fields := d.uvarint()
	if fields&fieldAttempt != 0 {
		r.Attempt = d.int()
	}
	if fields&fieldToken != 0 {
		r.Token = Token{fence: d.uvarint(), serial: d.uvarint(), instance: d.uint64()}
	}
	wide := fields&fieldWideTimes != 0
	if fields&fieldAt != 0 {
		r.At = d.recordTime(wide)
	}
	switch {
	case fields&fieldAcquiredAtIsAt != 0:
		r.AcquiredAt = r.At
	case fields&fieldAcquiredAt != 0:
		r.AcquiredAt = d.recordTime(wide)
	}
	if fields&fieldExpiresAt != 0 {
		r.ExpiresAt = d.recordTime(wide)
	}
	if fields&fieldRetries != 0 {
		r.Retries = d.int()
	}
	if fields&fieldCause != 0 {
		r.Cause = d.string()
	}
	r.Front = fields&fieldFront != 0
	if fields&fieldFence != 0 {
		r.Fence = d.uvarint()
	}
	r.Monotonic = fields&fieldMonotonic != 0
	if v == recordVersion2 && fields&^fieldsV2 != 0 {
		d.stop(fmt.Errorf("field bits %#x in a version 2 record", fields))
		return r
	}
	if fields&fieldNotBefore != 0 {
		r.NotBefore = d.recordTime(wide)
	}
	if fields&fieldKey != 0 {
		r.Key = d.string()
	}
	if fields&fieldPayload != 0 {
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			d.stop(fmt.Errorf("payload of %d bytes: %w", n, errShort))
			return r
		}
		r.Payload = append(make([]byte, 0, n), d.b[:n]...) // a copy, as strings are; not nil, even empty
		d.b = d.b[n:]
	}
	// Only the bits AppendBinary would write for these fields: not an
	// unknown bit, a field written as zero, an AcquiredAt written although
	// it equals At, wide times that fit in nanoseconds, or version 3
	// without its fields.
	if d.err == nil && r.fields() != fields {
		d.stop(fmt.Errorf("field bits %#x, but the fields make %#x", fields, r.fields()))
	}
	if d.err == nil && v == recordVersion && fields&^fieldsV2 == 0 {
		d.stop(errors.New("a version 3 record without the fields of version 3"))
	}
	return r
}

// recordHead reads what every version of a record starts with, after the
// version: the kind, the domain and the offset.
func (d *decoder) recordHead() Record {
	return Record{Kind: EventKind(d.byte()), Domain: d.string(), Offset: d.varint()}
}

// recordV1 reads the rest of a version 1 record: every field, in
// declaration order, with a flag byte before each time and a byte for
// Front.
func (d *decoder) recordV1() Record {
	r := d.recordHead()
	r.Attempt = d.int()
	r.Token = d.token()
	r.Cause = d.string()
	r.At = d.time()
	r.AcquiredAt = d.time()
	r.Retries = d.int()
	r.ExpiresAt = d.time()
	r.Front = d.bool()
	r.Fence = d.uvarint()
	return r
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendToken(b []byte, t Token) []byte {
	b = binary.AppendUvarint(b, t.fence)
	b = binary.AppendUvarint(b, t.serial)
	return binary.AppendUvarint(b, t.instance)
}

// appendTime appends t with a flag byte before it, 0 for the zero time.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	return appendUnix(append(b, 1), t)
}

// appendUnix appends t, which is not zero, as Unix seconds and nanoseconds.
func appendUnix(b []byte, t time.Time) []byte {
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

// stop records err, unless an error came first, and stops the reading.
func (d *decoder) stop(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.stop(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// uvarint reads a varint in its shortest form, the one
// binary.AppendUvarint writes: a longer one (a last byte of 0) is refused,
// so that each value decodes from one byte string only.
func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if !d.skipVarint(n) {
		return 0
	}
	return v
}

// varint reads a signed varint in its shortest form, as uvarint.
func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if !d.skipVarint(n) {
		return 0
	}
	return v
}

// skipVarint moves past the varint binary.Uvarint or binary.Varint just
// read from d.b, n bytes long as they reported, if it is in its shortest
// form, and reports whether it was.
func (d *decoder) skipVarint(n int) bool {
	if n <= 0 || n > 1 && d.b[n-1] == 0 {
		d.stop(errors.New("bad varint"))
		return false
	}
	d.b = d.b[n:]
	return true
}

// int reads a non-negative int.
func (d *decoder) int() int {
	v := d.uvarint()
	if v > math.MaxInt32 {
		d.stop(fmt.Errorf("count %d out of range", v))
		return 0
	}
	return int(v)
}

// items reads a number of items each at least minSize bytes long, and
// rejects one the remaining input cannot hold.
func (d *decoder) items(minSize int) int {
	n := d.int()
	if n > len(d.b)/minSize {
		d.stop(fmt.Errorf("count %d exceeds what %d bytes can hold", n, len(d.b)))
		return 0
	}
	return n
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > maxStringLen || n > uint64(len(d.b)) {
		d.stop(fmt.Errorf("string of %d bytes: %w", n, errShort))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) token() Token {
	return Token{fence: d.uvarint(), serial: d.uvarint(), instance: d.uvarint()}
}

// instant reads a time as an instant.
func (d *decoder) instant() instant { return instantOf(d.time()) }

// time reads what appendTime wrote.
func (d *decoder) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		return d.unix()
	default:
		d.stop(errors.New("bad time flag"))
		return time.Time{}
	}
}

// recordTime reads what appendRecordTime wrote, as a time in UTC.
func (d *decoder) recordTime(wide bool) time.Time {
	if wide {
		return d.unix()
	}
	return time.Unix(0, int64(d.uint64())).UTC()
}

// uint64 reads 8 bytes, little-endian.
func (d *decoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.stop(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// unix reads what appendUnix wrote, as a time in UTC.
func (d *decoder) unix() time.Time {
	sec := d.varint()
	nsec := d.uvarint()
	if nsec >= 1e9 {
		d.stop(fmt.Errorf("nanoseconds %d out of range", nsec))
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.stop(errors.New("bad bool"))
		return false
	}
}
