package worklease

import (
	"errors"
	"unicode/utf8"
)

// What a Manager keeps of a failure's cause: its text, taken outside the
// domain's lock, cut to MaxCauseLen, and restored after a restart.

// causeText is a Fail cause whose text was taken before the domain lock, so
// that the journal can record it without calling the caller's Error method
// under the lock. errors.Is and errors.As see through it.
type causeText struct {
	err  error
	text string
}

func (c *causeText) Error() string { return c.text }

func (c *causeText) Unwrap() error { return c.err }

// Is reports whether target is the package's own sentinel whose text c
// holds. A journal keeps only a cause's text, and replay turns those texts
// back into the sentinels (see causeFromText): a cause that reads as one
// matches it before a restart too, so that the same dead letter reads the
// same after one.
func (c *causeText) Is(target error) bool {
	return (target == ErrLeaseExpired || target == ErrLeaseRevoked) && c.text == target.Error()
}

// isSentinelText reports whether text is that of a sentinel that
// causeFromText restores.
func isSentinelText(text string) bool {
	return text == ErrLeaseExpired.Error() || text == ErrLeaseRevoked.Error()
}

// textOf returns the text a record keeps for cause. Causes that reach it
// are the package's own errors or a *causeText, never a caller's error.
func textOf(cause error) string {
	if cause == nil {
		return ""
	}
	return cause.Error()
}

// causeFromText turns a journaled cause back into an error, restoring the
// package's own sentinels so that errors.Is keeps working after a restart.
func causeFromText(text string) error {
	switch text {
	case "":
		return nil
	case ErrLeaseExpired.Error():
		return ErrLeaseExpired
	case ErrLeaseRevoked.Error():
		return ErrLeaseRevoked
	}
	return errors.New(text)
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
