package worklease

import (
	"cmp"
	"slices"
	"time"
)

// deadLetters is a domain's failed offsets with why and when each failed.
// Failures are the exception, so a map costs little; the zero value is empty
// and allocates nothing. A nil *deadLetters is empty too: every method but
// add works on it.
type deadLetters struct {
	m map[int64]deadLetter
	// byTime holds m's offsets in the order they failed: by at, then by
	// offset, oldest first, so that a listing of the latest failures
	// reads a domain's from its end. Failures come in that order but for a
	// nanosecond or two between calls that raced for the lock: each goes
	// in from the end.
	byTime []timedOffset
}

// A timedOffset is a failed offset and when it failed.
type timedOffset struct {
	at     instant
	offset int64
}

func (a timedOffset) compare(b timedOffset) int {
	if a.at != b.at {
		return cmp.Compare(a.at, b.at)
	}
	return cmp.Compare(a.offset, b.offset)
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
	if old, ok := d.m[offset]; ok {
		d.unlist(timedOffset{old.at, offset})
	}
	d.m[offset] = dl
	k := timedOffset{dl.at, offset}
	i := len(d.byTime)
	for i > 0 && d.byTime[i-1].compare(k) > 0 {
		i--
	}
	d.byTime = slices.Insert(d.byTime, i, k)
}

// unlist takes k out of byTime.
func (d *deadLetters) unlist(k timedOffset) {
	if i, ok := slices.BinarySearchFunc(d.byTime, k, timedOffset.compare); ok {
		d.byTime = slices.Delete(d.byTime, i, i+1)
	}
}

func (d *deadLetters) remove(offset int64) (deadLetter, bool) {
	if d == nil {
		return deadLetter{}, false
	}
	dl, ok := d.m[offset]
	if ok {
		delete(d.m, offset)
		d.unlist(timedOffset{dl.at, offset})
		if len(d.m) == 0 {
			d.m, d.byTime = nil, nil
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
