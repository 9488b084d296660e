package worklease

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordLayout keeps a record in the 192-byte size class, whose objects
// start on a cache line, with every field a TryAcquire+Succeed cycle reads
// or writes in its first two lines.
func TestRecordLayout(t *testing.T) {
	t.Parallel()
	var r domainRecord
	assert.LessOrEqual(t, unsafe.Sizeof(r), uintptr(recordSize), "record is %d bytes", unsafe.Sizeof(r))
	state := unsafe.Offsetof(r.state)
	hot := []struct {
		name       string
		off, bytes uintptr
	}{
		{"domain", unsafe.Offsetof(r.domain), unsafe.Sizeof(r.domain)},
		{"mu", unsafe.Offsetof(r.mu), unsafe.Sizeof(r.mu)},
		{"counts", unsafe.Offsetof(r.counts), unsafe.Sizeof(r.counts)},
		{"dropped", unsafe.Offsetof(r.dropped), unsafe.Sizeof(r.dropped)},
		{"state.leased", state + unsafe.Offsetof(r.state.leased), unsafe.Sizeof(r.state.leased)},
		{"state.paused", state + unsafe.Offsetof(r.state.paused), unsafe.Sizeof(r.state.paused)},
		{"state.released", state + unsafe.Offsetof(r.state.released), unsafe.Sizeof(r.state.released)},
		{"state.lease", state + unsafe.Offsetof(r.state.lease), unsafe.Sizeof(r.state.lease)},
		{"state.issued", state + unsafe.Offsetof(r.state.issued), unsafe.Sizeof(r.state.issued)},
		{"state.backlog", state + unsafe.Offsetof(r.state.backlog), unsafe.Sizeof(r.state.backlog)},
		{"state.cold", state + unsafe.Offsetof(r.state.cold), unsafe.Sizeof(r.state.cold)},
		// The highest processed run; the lower ones may follow in the
		// third line.
		{"state.processed.lo", state + unsafe.Offsetof(r.state.processed) + unsafe.Offsetof(r.state.processed.lo), unsafe.Sizeof(r.state.processed.lo)},
		{"state.processed.end", state + unsafe.Offsetof(r.state.processed) + unsafe.Offsetof(r.state.processed.end), unsafe.Sizeof(r.state.processed.end)},
	}
	for _, f := range hot {
		assert.LessOrEqual(t, f.off+f.bytes, uintptr(recordHotBytes), "%s ends at byte %d", f.name, f.off+f.bytes)
	}
}

// TestRecordStaysCompact checks that a domain keeps out of line only what
// it needs: cycles allocate neither a backlog nor a cold part; the first
// offset queued allocates a backlog, kept for the next; a dead letter
// allocates the cold part, and a redrive that empties it drops it.
func TestRecordStaysCompact(t *testing.T) {
	t.Parallel()
	m, err := New(WithMaxRetries(0))
	require.NoError(t, err)
	state := func() (*backlog, *domainCold) {
		_, r := m.lockRecord("d", false)
		require.NotNil(t, r)
		defer r.mu.Unlock()
		return r.state.backlog, r.state.cold
	}
	acquire := func(off int64) Token {
		res, err := m.TryAcquire("d", off)
		require.NoError(t, err)
		require.Equal(t, Acquired, res.Status)
		return res.Token
	}
	for off := range int64(3) {
		_, err := m.Succeed("d", acquire(off))
		require.NoError(t, err)
	}
	b, c := state()
	assert.Nil(t, b, "cycles allocate no backlog")
	assert.Nil(t, c, "cycles allocate no cold part")

	tok := acquire(3)
	res, err := m.TryAcquire("d", 4)
	require.NoError(t, err)
	require.Equal(t, Enqueued, res.Status)
	_, err = m.Succeed("d", tok)
	require.NoError(t, err)
	_, err = m.Succeed("d", acquire(4))
	require.NoError(t, err)
	b, c = state()
	assert.NotNil(t, b, "the backlog is kept once allocated")
	assert.Zero(t, b.len())
	assert.Nil(t, c)

	_, err = m.Fail("d", acquire(5), nil)
	require.NoError(t, err)
	_, c = state()
	require.NotNil(t, c, "a dead letter needs the cold part")
	assert.True(t, c.failed.contains(5))
	_, err = m.Redrive("d", 5)
	require.NoError(t, err)
	_, c = state()
	assert.Nil(t, c, "the cold part is dropped once empty")
	require.NoError(t, m.checkInvariants())
}

// TestRecordCountsWrap checks that a record's 32-bit counts carry into
// their wraps: Stats never loses four billion events, nor goes down, when
// a domain's count of a kind wraps around, and a forgotten domain hands
// its whole count to its shard.
func TestRecordCountsWrap(t *testing.T) {
	t.Parallel()
	m, err := New()
	require.NoError(t, err)
	res, err := m.TryAcquire("d", 0)
	require.NoError(t, err)
	_, r := m.lockRecord("d", false)
	require.NotNil(t, r)
	r.counts[0] = 1<<32 - 1 // one short of wrapping: the grant of offset 1 wraps it
	r.mu.Unlock()
	before := m.Stats().Acquired
	require.Equal(t, uint64(1<<32-1), before)
	_, err = m.Succeed("d", res.Token)
	require.NoError(t, err)
	_, err = m.TryAcquire("d", 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(1<<32), m.Stats().Acquired)
	_, r = m.lockRecord("d", false)
	require.NotNil(t, r.extra, "the first wrap allocates the extra part")
	assert.Equal(t, recordCounts{1, 0, 0}, r.extra.wraps)
	assert.Equal(t, uint32(0), r.counts[0])
	r.mu.Unlock()

	tok, err := m.TryAcquire("d", 1) // AlreadyAcquired: the holder's token
	require.NoError(t, err)
	_, err = m.Succeed("d", tok.Token)
	require.NoError(t, err)
	require.NoError(t, m.Forget("d"))
	assert.Equal(t, uint64(1<<32), m.Stats().Acquired, "the forgotten domain's count moved to its shard")
}
