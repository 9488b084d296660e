package worklease_test

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

var (
	_ fmt.Stringer             = worklease.Token{}
	_ encoding.TextMarshaler   = worklease.Token{}
	_ encoding.TextUnmarshaler = (*worklease.Token)(nil)
)

// randomToken returns a valid token with parts of every magnitude.
func randomToken(rng *rand.Rand) worklease.Token {
	part := func() uint64 {
		for {
			if x := rng.Uint64() >> rng.UintN(64); x != 0 {
				return x
			}
		}
	}
	return worklease.RawToken(part(), part(), part())
}

func TestTokenString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tok  worklease.Token
		want string
	}{
		{"smallest", worklease.RawToken(1, 1, 1), "1-1-0000000000000001"},
		{"typical", worklease.RawToken(7, 0x2a, 0xdeadbeef), "7-2a-00000000deadbeef"},
		{"largest", worklease.RawToken(math.MaxUint64, math.MaxUint64, math.MaxUint64),
			"18446744073709551615-ffffffffffffffff-ffffffffffffffff"},
		{"zero", worklease.Token{}, "0-0-0000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.tok.String())
			assert.Equal(t, tt.want, fmt.Sprint(tt.tok))
			text, err := tt.tok.MarshalText()
			require.NoError(t, err)
			if tt.tok.IsZero() {
				assert.Empty(t, text, "the zero Token marshals to empty text")
			} else {
				assert.Equal(t, tt.want, string(text))
			}
		})
	}
}

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(0x70c3, 1))
	for range 10000 {
		tok := randomToken(rng)
		s := tok.String()
		got, err := worklease.ParseToken(s)
		require.NoError(t, err, "ParseToken(%q)", s)
		require.Equal(t, tok, got, "ParseToken(%q)", s)
		require.Equal(t, tok.Fence(), got.Fence())
		require.False(t, got.IsZero())

		text, err := tok.MarshalText()
		require.NoError(t, err)
		require.Equal(t, s, string(text))
		var back worklease.Token
		require.NoError(t, back.UnmarshalText(text))
		require.Equal(t, tok, back)
	}
}

func TestTokenUnmarshalText(t *testing.T) {
	t.Parallel()
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		var tok worklease.Token
		require.NoError(t, tok.UnmarshalText([]byte("3-1f-0123456789abcdef")))
		assert.Equal(t, worklease.RawToken(3, 0x1f, 0x0123456789abcdef), tok)
	})
	t.Run("invalid leaves the token unchanged", func(t *testing.T) {
		t.Parallel()
		tok := worklease.RawToken(3, 4, 5)
		err := tok.UnmarshalText([]byte("garbage"))
		require.ErrorIs(t, err, worklease.ErrInvalidToken)
		assert.Equal(t, worklease.RawToken(3, 4, 5), tok)
	})
}

func TestTokenJSON(t *testing.T) {
	t.Parallel()
	type job struct {
		Name  string                  `json:"name"`
		Token worklease.Token         `json:"token"`
		Ptr   *worklease.Token        `json:"ptr,omitempty"`
		ByTok map[worklease.Token]int `json:"by_tok,omitempty"`
	}
	t.Run("round trip in a struct", func(t *testing.T) {
		t.Parallel()
		tok := worklease.RawToken(7, 0x2a, 0xdeadbeef)
		other := worklease.RawToken(8, 0x2a, 0xdeadbeef)
		in := job{Name: "a", Token: tok, Ptr: &other, ByTok: map[worklease.Token]int{tok: 1, other: 2}}
		data, err := json.Marshal(in)
		require.NoError(t, err)
		assert.JSONEq(t, `{
			"name": "a",
			"token": "7-2a-00000000deadbeef",
			"ptr": "8-2a-00000000deadbeef",
			"by_tok": {"7-2a-00000000deadbeef": 1, "8-2a-00000000deadbeef": 2}
		}`, string(data))
		var out job
		require.NoError(t, json.Unmarshal(data, &out))
		assert.Equal(t, in, out)
	})
	t.Run("zero token round trip", func(t *testing.T) {
		t.Parallel()
		data, err := json.Marshal(job{Name: "none"})
		require.NoError(t, err)
		assert.JSONEq(t, `{"name": "none", "token": ""}`, string(data))
		out := job{Token: worklease.RawToken(1, 1, 1)}
		require.NoError(t, json.Unmarshal(data, &out))
		assert.True(t, out.Token.IsZero())
	})
	tests := []struct {
		name string
		data string
	}{
		{"garbage string", `{"token": "nope"}`},
		{"zero token's text", `{"token": "0-0-0000000000000000"}`},
		{"garbage map key", `{"by_tok": {"1-1-1": 1}}`},
	}
	for _, tt := range tests {
		t.Run("rejects "+tt.name, func(t *testing.T) {
			t.Parallel()
			var out job
			err := json.Unmarshal([]byte(tt.data), &out)
			require.ErrorIs(t, err, worklease.ErrInvalidToken)
		})
	}
	t.Run("rejects a number", func(t *testing.T) {
		t.Parallel()
		var out job
		require.Error(t, json.Unmarshal([]byte(`{"token": 7}`), &out))
	})
}

func TestParseTokenValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want worklease.Token
	}{
		{"smallest", "1-1-0000000000000001", worklease.RawToken(1, 1, 1)},
		{"largest", "18446744073709551615-ffffffffffffffff-ffffffffffffffff",
			worklease.RawToken(math.MaxUint64, math.MaxUint64, math.MaxUint64)},
		{"typical", "42-abc-0123456789abcdef", worklease.RawToken(42, 0xabc, 0x0123456789abcdef)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := worklease.ParseToken(tt.text)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.text, got.String())
		})
	}
}

func TestParseTokenInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
	}{
		{"empty", ""},
		{"dash", "-"},
		{"two dashes", "--"},
		{"two parts", "1-1"},
		{"instance missing", "1-1-"},
		{"zero fence", "0-1-0000000000000001"},
		{"zero domain", "1-0-0000000000000001"},
		{"zero instance", "1-1-0000000000000000"},
		{"zero token", "0-0-0000000000000000"},
		{"empty fence", "-1-0000000000000001"},
		{"empty domain", "1--0000000000000001"},
		{"short instance", "1-1-000000000000001"},
		{"long instance", "1-1-00000000000000001"},
		{"unpadded instance", "1-1-1"},
		{"fourth part", "1-1-0000000000000001-1"},
		{"dash inside instance", "1-1-000000000000-001"},
		{"trailing junk", "1-1-0000000000000001x"},
		{"trailing space", "1-1-0000000000000001 "},
		{"trailing newline", "1-1-0000000000000001\n"},
		{"leading space", " 1-1-0000000000000001"},
		{"space in fence", "1 -1-0000000000000001"},
		{"space in domain", "1- 1-0000000000000001"},
		{"plus fence", "+1-1-0000000000000001"},
		{"minus fence", "--1-1-0000000000000001"},
		{"plus domain", "1-+1-0000000000000001"},
		{"plus instance", "1-1-+000000000000001"},
		{"hex fence", "a-1-0000000000000001"},
		{"0x fence", "0x1-1-0000000000000001"},
		{"0x domain", "1-0x1-0000000000000001"},
		{"0x instance", "1-1-0x00000000000001"},
		{"non-hex domain", "1-g-0000000000000001"},
		{"non-hex instance", "1-1-000000000000000g"},
		{"underscore fence", "1_0-1-0000000000000001"},
		{"underscore domain", "1-1_0-0000000000000001"},
		{"fence overflow", "18446744073709551616-1-0000000000000001"},
		{"domain overflow", "1-10000000000000000-0000000000000001"},
		{"non-ASCII", "1-1-000000000000000é"},
		{"NUL", "1-1-000000000000000\x00"},
		{"words", "not a token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok, err := worklease.ParseToken(tt.text)
			require.ErrorIs(t, err, worklease.ErrInvalidToken)
			assert.True(t, tok.IsZero(), "a failed parse returns the zero Token")
			assert.Contains(t, err.Error(), fmt.Sprintf("%q", tt.text), "the error quotes the input")
		})
	}
}

// TestParseTokenRejectsNonCanonical checks that ParseToken accepts only the
// exact text Token.String makes, as its doc says ("It rejects anything
// else"), so that a token has one text form and tokens compared as text
// compare as tokens.
func TestParseTokenRejectsNonCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string // parses, if accepted, to a token whose String is not text
	}{
		{"leading zero in fence", "01-1-0000000000000001"},
		{"leading zero in domain", "1-01-0000000000000001"},
		{"upper-case domain", "1-A-0000000000000001"},
		{"upper-case instance", "1-1-000000000000000A"},
		{"17-digit domain", "1-00000000000000001-0000000000000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok, err := worklease.ParseToken(tt.text)
			if err == nil {
				t.Errorf("ParseToken(%q) = %v, nil; want ErrInvalidToken, since Token.String gives %q",
					tt.text, tok, tok.String())
				return
			}
			assert.ErrorIs(t, err, worklease.ErrInvalidToken)
		})
	}
}

func TestTokenZero(t *testing.T) {
	t.Parallel()
	var zero worklease.Token
	assert.True(t, zero.IsZero())
	assert.Zero(t, zero.Fence())
	_, err := worklease.ParseToken(zero.String())
	require.ErrorIs(t, err, worklease.ErrInvalidToken, "the zero Token's text does not parse")
	var back worklease.Token
	require.ErrorIs(t, back.UnmarshalText([]byte(zero.String())), worklease.ErrInvalidToken)

	for _, tok := range []worklease.Token{
		worklease.RawToken(1, 0, 0),
		worklease.RawToken(0, 1, 0),
		worklease.RawToken(0, 0, 1),
	} {
		assert.False(t, tok.IsZero(), "%v", tok)
	}
}

func TestTokenComparable(t *testing.T) {
	t.Parallel()
	base := worklease.RawToken(5, 6, 7)
	variants := map[string]worklease.Token{
		"base":             base,
		"another fence":    worklease.RawToken(6, 6, 7),
		"another domain":   worklease.RawToken(5, 9, 7),
		"another instance": worklease.RawToken(5, 6, 9),
		"zero":             {},
	}
	seen := make(map[worklease.Token]string)
	for name, tok := range variants {
		other, dup := seen[tok]
		require.False(t, dup, "%s and %s are the same key", name, other)
		seen[tok] = name
	}
	assert.Equal(t, base, worklease.RawToken(5, 6, 7))
	assert.True(t, base == worklease.RawToken(5, 6, 7))
	assert.Equal(t, "base", seen[worklease.RawToken(5, 6, 7)], "a rebuilt token finds its key")
	parsed, err := worklease.ParseToken(base.String())
	require.NoError(t, err)
	assert.Equal(t, "base", seen[parsed], "a parsed token finds its key")
	assert.Equal(t, uint64(5), base.Fence())
}

// sink keeps the compiler from discarding the measured work.
var (
	sinkBool   bool
	sinkUint   uint64
	sinkToken  worklease.Token
	sinkString string
)

// TestTokenAllocs is not parallel: testing.AllocsPerRun counts every
// goroutine's allocations.
func TestTokenAllocs(t *testing.T) {
	tok := worklease.RawToken(7, 0x2a, 0xdeadbeef)
	other := worklease.RawToken(8, 0x2a, 0xdeadbeef)
	tests := []struct {
		name string
		max  float64
		f    func()
	}{
		{"compare", 0, func() { sinkBool = tok == other }},
		{"Fence", 0, func() { sinkUint = tok.Fence() }},
		{"IsZero", 0, func() { sinkBool = tok.IsZero() }},
		{"create", 0, func() { sinkToken = worklease.RawToken(sinkUint+1, 2, 3) }},
		{"copy", 0, func() { sinkToken = tok }},
		{"String makes only its string", 1, func() { sinkString = tok.String() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.LessOrEqual(t, testing.AllocsPerRun(1000, tt.f), tt.max)
		})
	}
	t.Run("map key", func(t *testing.T) {
		m := map[worklease.Token]int{tok: 1, other: 2}
		assert.Zero(t, testing.AllocsPerRun(1000, func() {
			m[tok]++
			sinkBool = m[other] > 0
		}))
	})
}

// FuzzParseToken checks that ParseToken never panics, fails only with
// ErrInvalidToken and the zero Token, and that a token it accepts prints as
// text that parses back to it.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		"1-1-0000000000000001",
		"7-2a-00000000deadbeef",
		"18446744073709551615-ffffffffffffffff-ffffffffffffffff",
		"0-0-0000000000000000",
		"", "-", "--", "1-1", "1-1-", "01-1-0000000000000001",
		"+1-1-0000000000000001", "1-1-000000000000000G",
		"18446744073709551616-1-0000000000000001",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := worklease.ParseToken(s)
		if err != nil {
			require.ErrorIs(t, err, worklease.ErrInvalidToken)
			require.True(t, tok.IsZero(), "a failed parse returns the zero Token")
			var u worklease.Token
			if s == "" {
				require.NoError(t, u.UnmarshalText(nil), "empty text is the zero Token")
			} else {
				require.ErrorIs(t, u.UnmarshalText([]byte(s)), worklease.ErrInvalidToken)
			}
			return
		}
		require.False(t, tok.IsZero())
		require.NotZero(t, tok.Fence())
		text := tok.String()
		require.Equal(t, s, text, "a token has exactly one text form")
		back, err := worklease.ParseToken(text)
		require.NoError(t, err, "%q prints as %q", s, text)
		require.Equal(t, tok, back)
		require.Equal(t, text, back.String())
		var u worklease.Token
		require.NoError(t, u.UnmarshalText([]byte(s)))
		require.Equal(t, tok, u)
	})
}

func BenchmarkParseToken(b *testing.B) {
	s := worklease.RawToken(12345, 0x2a, 0xdeadbeefcafef00d).String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := worklease.ParseToken(s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNewToken builds tokens through the exported API only, as a backend in
// another module does: from parts and back, through text, and the same as
// a Manager's own.
func TestNewToken(t *testing.T) {
	t.Parallel()
	tok, err := worklease.NewToken(7, 0x2a, 0xdeadbeef)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), tok.Fence())
	assert.Equal(t, uint64(0x2a), tok.Serial())
	assert.Equal(t, uint64(0xdeadbeef), tok.Instance())
	assert.Equal(t, "7-2a-00000000deadbeef", tok.String())
	back, err := worklease.ParseToken(tok.String())
	require.NoError(t, err)
	assert.Equal(t, tok, back)

	for _, parts := range [][3]uint64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {0, 0, 0}} {
		got, err := worklease.NewToken(parts[0], parts[1], parts[2])
		require.ErrorIs(t, err, worklease.ErrInvalidToken, "%v", parts)
		assert.True(t, got.IsZero(), "%v", parts)
	}

	m, err := worklease.New()
	require.NoError(t, err)
	res, err := m.TryAcquire("A", 1)
	require.NoError(t, err)
	same, err := worklease.NewToken(res.Token.Fence(), res.Token.Serial(), res.Token.Instance())
	require.NoError(t, err)
	require.Equal(t, res.Token, same, "a token rebuilt from its parts is the token")
	other, err := worklease.NewToken(res.Token.Fence(), res.Token.Serial()+1, res.Token.Instance())
	require.NoError(t, err)
	_, err = m.Succeed("A", other)
	require.ErrorIs(t, err, worklease.ErrTokenMismatch, "another domain's serial")
	_, err = m.Succeed("A", same)
	require.NoError(t, err)
}
