package wal_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// WithJournal says that if New fails it closes the journal itself (unless
// it is in use by another Manager). A New refused for its configuration
// does not: the log stays open and keeps its directory locked, so the
// caller who trusted the doc leaks it and cannot open the directory again.
func TestReview2NewWithInvalidConfigClosesJournal(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir)
	require.NoError(t, err)
	_, err = worklease.New(worklease.WithJournal(l), worklease.WithMaxRetries(-1))
	require.ErrorIs(t, err, worklease.ErrInvalidConfig)
	l2, err := wal.Open(dir)
	if err != nil {
		_ = l.Close()
	}
	require.NoError(t, err, "New failed but left the journal open and its directory locked")
	require.NoError(t, l2.Close())
}
