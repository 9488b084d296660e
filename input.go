package worklease

import (
	"fmt"
	"unicode/utf8"
)

// Limits on what a call takes. They bound every string a transition
// journals, so that a journal can take any record a Manager writes (see
// Journal), and they hold with or without a journal.
const (
	// MaxDomainLen is the longest domain key, in bytes, that a call
	// accepts. Every call that takes a domain returns an error wrapping
	// ErrInvalidDomain for a longer one, or for the empty domain, and
	// changes nothing.
	MaxDomainLen = 4096

	// MaxCauseLen is the longest text, in bytes, that a dead letter, an
	// event or a journal record keeps for a failure's cause. A longer
	// Fail cause or Kill reason is not refused (the work has failed
	// already): its text is cut to at most MaxCauseLen bytes, at a UTF-8
	// boundary, and the cut text is what DeadLetter.Cause reports, before
	// and after a restart. A cut Fail cause still unwraps to the caller's
	// error.
	MaxCauseLen = 4096
)

// checkOpen returns the error every call returns once the Manager is closed or
// its journal has failed, and for a zero or nil Manager; nil otherwise.
func (m *Manager) checkOpen() error {
	if m == nil || !m.open.Load() {
		return m.notOpenErr()
	}
	return nil
}

// notOpenErr is checkOpen's answer for a Manager that is not open.
func (m *Manager) notOpenErr() error {
	if m == nil || m.shards == nil {
		return errNotNew
	}
	if f := m.failure.Load(); f != nil {
		return *f
	}
	return ErrClosed
}

// errNotNew is what a Manager that New did not make returns.
var errNotNew error = notNewError{}

// notNewError is the error of a zero or nil Manager. It matches ErrClosed,
// as such a Manager is never open.
type notNewError struct{}

func (notNewError) Error() string {
	return "worklease: manager is not usable: the zero Manager and a nil one are not open; use New"
}

func (notNewError) Is(target error) bool { return target == ErrClosed }

// accepts reports whether a call on domain, at offset, may go ahead: the
// Manager is open, domain is a valid domain key and offset is not
// negative. Calls that take no offset pass 0. Every call on one domain
// starts with it, before it changes anything, and returns refuse's error
// if it fails:
//
//	if !m.accepts(domain, offset) {
//		return …, m.refuse("Call", domain, offset)
//	}
//
// It is kept small enough to inline, as the hot path runs it on every call.
func (m *Manager) accepts(domain string, offset int64) bool {
	// uint(len-1) folds the empty domain into the length check.
	return m != nil && m.open.Load() && uint(len(domain)-1) < MaxDomainLen && offset >= 0
}

// refuse returns the error of the call op, which accepts refused: the
// first of these that applies, in this order: the Manager is not open
// (ErrClosed, or the journal's failure), domain is invalid
// (ErrInvalidDomain), offset is negative (ErrInvalidOffset).
func (m *Manager) refuse(op, domain string, offset int64) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	if !validDomain(domain) {
		return domainError(op, domain, ErrInvalidDomain)
	}
	return domainError(op, domain, ErrInvalidOffset)
}

// validDomain reports whether a call accepts domain. A journal written
// before domains were bounded may hold others: the Manager keeps them, and
// writes no record of them (see Reap).
func validDomain(domain string) bool { return len(domain) > 0 && len(domain) <= MaxDomainLen }

// shortDomain is how an error names domain: quoted whole if short, else
// a quoted prefix and its length, so that a huge domain never makes a huge
// error message.
func shortDomain(domain string) string {
	const show = 64
	if len(domain) <= show {
		return fmt.Sprintf("%q", domain)
	}
	return fmt.Sprintf("%q… (%d bytes)", truncateText(domain, show), len(domain))
}

// truncateText returns s cut to at most n bytes, without splitting a UTF-8
// sequence: a rune that would cross n is dropped whole. (An invalid
// sequence is cut at n or up to three bytes before.)
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return s[:n]
}

// keepCause returns the cause Fail passes on to the domain's state for
// err, whose text it takes here, outside the domain's lock, as that calls
// the caller's code. A cause whose text must be kept, because a journal
// records it, or changed, because it is empty (a dead letter keeps no
// cause then) or longer than MaxCauseLen, or read as a sentinel of the
// package (see causeText.Is), becomes a *causeText with that text; any
// other is passed on as it is.
func keepCause(err error, journaled bool) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if journaled || text == "" || len(text) > MaxCauseLen || isSentinelText(text) {
		return &causeText{err: err, text: truncateText(text, MaxCauseLen)}
	}
	return err
}

// reasonCause returns the cause Kill keeps for reason: none for the empty
// reason, and otherwise its text cut to MaxCauseLen.
func reasonCause(reason string) error {
	if reason == "" {
		return nil
	}
	return &causeText{text: truncateText(reason, MaxCauseLen)}
}

// deadLetterCause is the cause a dead letter keeps: none if its text is
// empty, as a journal keeps no text for it. Causes that reach it are the
// package's own errors, a *causeText, or a caller's error whose text
// keepCause found non-empty.
func deadLetterCause(cause error) error {
	if c, ok := cause.(*causeText); ok && c.text == "" {
		return nil
	}
	return cause
}
