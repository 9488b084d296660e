package worklease

import (
	"slices"
	"time"
)

// deadLetters is a domain's failed offsets with why and when each failed.
// Failures are the exception, so a map costs little; the zero value is empty
// and allocates nothing. A nil *deadLetters is empty too: every method but
// add works on it.
type deadLetters struct {
	m map[int64]deadLetter
}

type deadLetter struct {
	cause    error // as passed to Fail, ErrLeaseExpired, or the reason given to Kill; may be nil
	attempts int   // attempts made, the failing one included; 0 if killed before any
	at       instant
}

func (d *deadLetters) len() int64 {
	if d == nil {
		return 0
	}
	return int64(len(d.m))
}

func (d *deadLetters) contains(offset int64) bool {
	if d == nil || len(d.m) == 0 { // most domains have none: skip the map call
		return false
	}
	_, ok := d.m[offset]
	return ok
}

func (d *deadLetters) add(offset int64, dl deadLetter) {
	if d.m == nil {
		d.m = make(map[int64]deadLetter)
	}
	d.m[offset] = dl
}

func (d *deadLetters) remove(offset int64) (deadLetter, bool) {
	if d == nil {
		return deadLetter{}, false
	}
	dl, ok := d.m[offset]
	if ok {
		delete(d.m, offset)
		if len(d.m) == 0 {
			d.m = nil
		}
	}
	return dl, ok
}

// offsets returns the failed offsets in ascending order.
func (d *deadLetters) offsets() []int64 {
	if d == nil {
		return nil
	}
	out := make([]int64, 0, len(d.m))
	for off := range d.m {
		out = append(out, off)
	}
	slices.Sort(out)
	return out
}

// DeadLetter describes a failed offset: one that ran out of retries, whose
// lease expired too often, or that an operator killed. It stays failed, and
// TryAcquire answers AlreadyFailed for it, until Redrive.
type DeadLetter struct {
	Domain string
	Offset int64
	// Cause is the last failure: Fail's cause, ErrLeaseExpired, or Kill's
	// reason, its text cut to MaxCauseLen bytes. It is nil if there was
	// none, or if its text was empty: a journal keeps a cause as its text,
	// so an empty one reads the same before and after a restart. After a
	// restart it is an error with the same text (ErrLeaseExpired and
	// ErrLeaseRevoked are restored as themselves, and a cause whose text is
	// one of theirs matches it under errors.Is before a restart too).
	Cause    error
	Attempts int       // attempts made, the last one included; 0 if killed before any
	At       time.Time // when it failed
	// Payload is what Enqueue stored with the offset, where the backend
	// keeps payloads: InspectDeadLetter fills it, and ListDeadLetters
	// when asked to; nil otherwise, and from DeadLetters.
	Payload []byte
}

func (d *deadLetters) appendTo(dst []DeadLetter, domain string, loc *time.Location) []DeadLetter {
	if d == nil {
		return dst
	}
	for _, off := range d.offsets() {
		dl := d.m[off]
		dst = append(dst, DeadLetter{Domain: domain, Offset: off, Cause: dl.cause, Attempts: dl.attempts, At: dl.at.in(loc)})
	}
	return dst
}
