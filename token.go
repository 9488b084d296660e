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
// managers and processes: it combines the fence, a serial number that
// tells the domain from the others its issuer serves, and an instance that
// tells the issuer from every other: a random number chosen once per
// Manager. A backend that keeps leases elsewhere (a database) makes its
// tokens with NewToken from parts of its own. The zero Token is never
// issued and never valid.
type Token struct {
	fence    uint64 // grows with every grant in the domain (from above the fences of forgotten domains); 0 only in the zero Token
	serial   uint64 // the domain's serial number within the issuing instance; never 0
	instance uint64 // the issuer's: random per Manager; never 0
}

// NewToken returns the token of a grant with the given fence, in the domain
// with the given serial number, by the issuer instance. It is for backends
// other than the in-memory Manager: the fence must grow with every grant in
// a domain, and the serial and instance together must tell the domain from
// every other the backend ever serves, across its processes and restarts.
// A token made of the parts of another (t.Fence(), t.Serial(),
// t.Instance()) equals it. NewToken returns an error wrapping
// ErrInvalidToken if a part is zero.
func NewToken(fence, serial, instance uint64) (Token, error) {
	if fence == 0 || serial == 0 || instance == 0 {
		return Token{}, fmt.Errorf("%w: fence %d, serial %d, instance %d: no part may be zero", ErrInvalidToken, fence, serial, instance)
	}
	return Token{fence: fence, serial: serial, instance: instance}, nil
}

// Serial returns the serial number of the token's domain within its issuer:
// with Instance, what tells its domain from every other. The zero Token has
// serial 0.
func (t Token) Serial() uint64 { return t.serial }

// Instance returns the identity of the token's issuer: for the in-memory
// Manager, a random number chosen by New. The zero Token has instance 0.
func (t Token) Instance() uint64 { return t.instance }

// Fence returns the token's fencing number. Every grant in a domain gets a
// larger fence than the grant before it, so a downstream store that remembers
// the highest fence it has seen per domain can reject writes from a holder
// that has since lost its lease. The zero Token has fence 0.
func (t Token) Fence() uint64 { return t.fence }

// IsZero reports whether t is the zero Token, which is never issued.
func (t Token) IsZero() bool { return t == Token{} }

// String returns the token's text form, "fence-serial-instance": the fence
// in decimal, the domain's serial in hex and the 16-hex-digit instance.
// ParseToken reverses it.
func (t Token) String() string {
	var b [64]byte
	return string(t.appendText(b[:0]))
}

func (t Token) appendText(b []byte) []byte {
	b = strconv.AppendUint(b, t.fence, 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, t.serial, 16)
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
	serial, instance, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 || len(instance) != 16 {
		return Token{}, fmt.Errorf("%w: %q", ErrInvalidToken, s)
	}
	var t Token
	var err1, err2, err3 error
	t.fence, err1 = strconv.ParseUint(fence, 10, 64)
	t.serial, err2 = strconv.ParseUint(serial, 16, 64)
	t.instance, err3 = strconv.ParseUint(instance, 16, 64)
	if err := errors.Join(err1, err2, err3); err != nil || t.fence == 0 || t.serial == 0 || t.instance == 0 ||
		t.String() != s { // canonical spelling only
		return Token{}, fmt.Errorf("%w: %q", ErrInvalidToken, s)
	}
	return t, nil
}
