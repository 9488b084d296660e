package worklease

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A Token identifies one lease grant. Succeed and Fail accept only the token
// of the lease the domain currently holds.
//
// A Token is a small comparable value: it is created, copied and compared
// without allocating, and may be used as a map key. It is unique across
// managers and processes: it combines a random identifier chosen once per
// Manager, a number unique to the domain within that Manager, and the fence.
// The zero Token is never issued and never valid.
type Token struct {
	fence    uint64 // grants so far in the domain, this one included; 0 only in the zero Token
	domain   uint64 // the domain's serial number within the issuing Manager; never 0
	instance uint64 // random per Manager; never 0
}

// Fence returns the token's fencing number. Every grant in a domain gets a
// larger fence than the grant before it, so a downstream store that remembers
// the highest fence it has seen per domain can reject writes from a holder
// that has since lost its lease. The zero Token has fence 0.
func (t Token) Fence() uint64 { return t.fence }

// IsZero reports whether t is the zero Token, which is never issued.
func (t Token) IsZero() bool { return t == Token{} }

// String returns the token's text form, "fence-domain-instance": the fence in
// decimal, the domain serial in hex and the 16-hex-digit manager instance.
// ParseToken reverses it.
func (t Token) String() string {
	var b [64]byte
	return string(t.appendText(b[:0]))
}

func (t Token) appendText(b []byte) []byte {
	b = strconv.AppendUint(b, t.fence, 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, t.domain, 16)
	b = append(b, '-')
	const hexDigits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[t.instance>>uint(shift)&0xf])
	}
	return b
}

// MarshalText implements encoding.TextMarshaler with the String form, except
// that the zero Token marshals to empty text, so that a struct holding "no
// token" survives a round trip through JSON.
func (t Token) MarshalText() ([]byte, error) {
	if t.IsZero() {
		return []byte{}, nil
	}
	return t.appendText(nil), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseToken, except
// that empty text is the zero Token.
func (t *Token) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*t = Token{}
		return nil
	}
	p, err := ParseToken(string(text))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// ErrInvalidToken is returned by ParseToken for text that is not a token.
var ErrInvalidToken = errors.New("worklease: invalid token")

// ParseToken parses the text form made by Token.String. It rejects anything
// else, including the zero Token's text and other spellings of a valid token
// (leading zeros, upper-case hex), with an error wrapping ErrInvalidToken, so
// that a token has exactly one text form.
func ParseToken(s string) (Token, error) {
	fence, rest, ok1 := strings.Cut(s, "-")
	domain, instance, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 || len(instance) != 16 {
		return Token{}, fmt.Errorf("%w: %q", ErrInvalidToken, s)
	}
	var t Token
	var err1, err2, err3 error
	t.fence, err1 = strconv.ParseUint(fence, 10, 64)
	t.domain, err2 = strconv.ParseUint(domain, 16, 64)
	t.instance, err3 = strconv.ParseUint(instance, 16, 64)
	if err := errors.Join(err1, err2, err3); err != nil || t.fence == 0 || t.domain == 0 || t.instance == 0 ||
		t.String() != s { // canonical spelling only
		return Token{}, fmt.Errorf("%w: %q", ErrInvalidToken, s)
	}
	return t, nil
}
