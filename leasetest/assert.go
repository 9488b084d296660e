package leasetest

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/worklease/worklease"
)

// The suite's assertions. It imports no assertion library, so that a
// backend's module inherits no test dependency from it; these are the few
// it needs, for both *testing.T and *rapid.T.

// tb is what the assertions need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// msg formats msgAndArgs, a format string and its arguments, as a prefix
// for a failure message.
func msg(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...) + ": "
	}
	return fmt.Sprint(msgAndArgs...) + ": "
}

// check fails the test with the message unless ok. The checks that run
// after every step of the model use it, as it costs nothing unless it fails.
func check(t tb, ok bool, format string, args ...any) {
	if !ok {
		t.Helper()
		t.Fatalf(format, args...)
	}
}

func mustNoError(t tb, err error, msgAndArgs ...any) {
	if err != nil {
		t.Helper()
		t.Fatalf("%sunexpected error: %v", msg(msgAndArgs), err)
	}
}

func mustTrue(t tb, ok bool, msgAndArgs ...any) {
	if !ok {
		t.Helper()
		t.Fatalf("%sshould be true", msg(msgAndArgs))
	}
}

func mustFalse(t tb, ok bool, msgAndArgs ...any) {
	if ok {
		t.Helper()
		t.Fatalf("%sshould be false", msg(msgAndArgs))
	}
}

// mustEqual checks that got equals want as equal reports.
func mustEqual(t tb, want, got any, msgAndArgs ...any) {
	if !equal(want, got) {
		t.Helper()
		t.Fatalf("%snot equal:\n got: %+v\nwant: %+v", msg(msgAndArgs), got, want)
	}
}

func mustNotEqual(t tb, notWant, got any, msgAndArgs ...any) {
	if equal(notWant, got) {
		t.Helper()
		t.Fatalf("%sshould not be %+v", msg(msgAndArgs), got)
	}
}

// mustZero checks that v is its type's zero value, as equal sees it.
func mustZero(t tb, v any, msgAndArgs ...any) {
	if v != nil && !equal(reflect.Zero(reflect.TypeOf(v)).Interface(), v) {
		t.Helper()
		t.Fatalf("%sshould be zero, is %+v", msg(msgAndArgs), v)
	}
}

// mustErrorIs checks that err matches want under errors.Is.
func mustErrorIs(t tb, err, want error, msgAndArgs ...any) {
	if !errors.Is(err, want) {
		t.Helper()
		t.Fatalf("%serror %v does not match %v", msg(msgAndArgs), err, want)
	}
}

// sentinels are the errors a call may return; each test of an error checks
// that it is the one expected and none of the others.
var sentinels = []error{
	worklease.ErrNoLease, worklease.ErrTokenMismatch, worklease.ErrBacklogOrder,
	worklease.ErrLeaseExpired, worklease.ErrLeaseRevoked, worklease.ErrInvalidDuration,
	worklease.ErrInvalidOffset, worklease.ErrNotDeadLettered, worklease.ErrAlreadyProcessed,
	worklease.ErrDomainBusy, worklease.ErrClosed, worklease.ErrInvalidDomain, worklease.ErrOffsetAhead,
	worklease.ErrInvalidClaim, worklease.ErrPayloadMismatch, worklease.ErrPayloadTooLarge, worklease.ErrInvalidKey,
	worklease.ErrNotQueued, worklease.ErrInFlight,
}

// mustSentinel checks that err matches want under errors.Is, and none of
// the other sentinels.
func mustSentinel(t tb, want, err error, msgAndArgs ...any) {
	t.Helper()
	mustErrorIs(t, err, want, msgAndArgs...)
	for _, other := range sentinels {
		if other != want && errors.Is(err, other) {
			t.Fatalf("%serror %v matches %v as well as %v", msg(msgAndArgs), err, other, want)
		}
	}
}

// mustErrors checks a batch call's errors, one for each of its items: nil
// where want has nil, else the sentinel want has (see mustSentinel).
func mustErrors(t tb, op string, want, errs []error) {
	t.Helper()
	mustEqual(t, len(want), len(errs), "%s's errors", op)
	for i, w := range want {
		if w == nil {
			mustNoError(t, errs[i], "%s: item %d", op, i)
		} else {
			mustSentinel(t, w, errs[i], "%s: item %d", op, i)
		}
	}
}

// equal reports whether want and got hold the same values, field by field,
// as a caller of a backend tells them apart: times are equal if they are the
// same instant (whatever their location or monotonic reading), errors if
// their text is, and a nil slice equals an empty one.
func equal(want, got any) bool {
	if want == nil || got == nil {
		return want == nil && got == nil
	}
	return equalValue(reflect.ValueOf(want), reflect.ValueOf(got))
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	tokenType = reflect.TypeFor[worklease.Token]()
	errorType = reflect.TypeFor[error]()
)

func equalValue(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch {
	case a.Type() == timeType:
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	case a.Type() == tokenType:
		return a.Interface() == b.Interface()
	case a.Type() == errorType:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() && b.IsNil()
		}
		return a.Interface().(error).Error() == b.Interface().(error).Error()
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() && b.IsNil()
		}
		return equalValue(a.Elem(), b.Elem())
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !equalValue(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	default:
		return a.Interface() == b.Interface()
	}
}

func mustGreater[T cmp.Ordered](t tb, a, b T, msgAndArgs ...any) {
	if !(a > b) {
		t.Helper()
		t.Fatalf("%s%v is not greater than %v", msg(msgAndArgs), a, b)
	}
}

// mustLen checks that v, a slice or map, has n elements.
func mustLen(t tb, v any, n int, msgAndArgs ...any) {
	if l := reflect.ValueOf(v).Len(); l != n {
		t.Helper()
		t.Fatalf("%shas %d elements, want %d: %+v", msg(msgAndArgs), l, n, v)
	}
}

// mustEmpty checks that v, a slice or map, has no elements.
func mustEmpty(t tb, v any, msgAndArgs ...any) {
	t.Helper()
	mustLen(t, v, 0, msgAndArgs...)
}
