package worklease_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/memjournal"
)

// TestRestoredLeaseKeepsItsToken checks a lease that replay restores: its
// token is the one the Manager before the restart granted, which the new
// Manager keeps apart from its own tokens until the lease ends, and the
// domain's next grant is the new Manager's, with the next fence.
func TestRestoredLeaseKeepsItsToken(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	res, err := m.TryAcquire("d", 0)
	require.NoError(t, err)
	old := res.Token
	assert.False(t, worklease.HasColdPart(m, "d"), "a grant needs no cold part")
	require.NoError(t, m.Close())

	m, err = worklease.New(worklease.WithJournal(j.Reopen()))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	info, err := m.Inspect("d")
	require.NoError(t, err)
	require.True(t, info.Leased)
	assert.Equal(t, old, info.Lease.Token, "the lease survives under its token")
	assert.True(t, worklease.HasColdPart(m, "d"), "another Manager's token is kept apart")
	require.NoError(t, worklease.CheckInvariants(m))

	_, err = m.Succeed("d", old)
	require.NoError(t, err)
	assert.False(t, worklease.HasColdPart(m, "d"), "the cold part goes with the lease")
	res, err = m.TryAcquire("d", 1)
	require.NoError(t, err)
	require.Equal(t, worklease.Acquired, res.Status)
	assert.Equal(t, old.Fence()+1, res.Token.Fence())
	assert.NotEqual(t, old, res.Token)
	_, err = m.Succeed("d", res.Token)
	require.NoError(t, err)
	require.NoError(t, worklease.CheckInvariants(m))
}
