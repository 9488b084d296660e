package worklease_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// TestEventKindsAreFrozen pins the values of the kinds that journals store
// and the PostgreSQL schema writes as numbers: they are never renumbered
// (see EventKind). A new transition takes the next number, 18.
func TestEventKindsAreFrozen(t *testing.T) {
	t.Parallel()
	frozen := []struct {
		kind  worklease.EventKind
		value uint8
	}{
		{worklease.EventAcquired, 1},
		{worklease.EventEnqueued, 2},
		{worklease.EventProcessed, 3},
		{worklease.EventRetrying, 4},
		{worklease.EventDeadLettered, 5},
		{worklease.EventExpired, 6},
		{worklease.EventRequeued, 7},
		{worklease.EventExtended, 8},
		{worklease.EventRejected, 9},
		{worklease.EventOutOfOrder, 10},
		{worklease.EventKilled, 11},
		{worklease.EventRedriven, 12},
		{worklease.EventReleased, 13},
		{worklease.EventPaused, 14},
		{worklease.EventResumed, 15},
		{worklease.EventForgotten, 16},
		{worklease.EventCancelled, 17},
		{worklease.RecordSettings, 128},
	}
	for _, f := range frozen {
		assert.Equal(t, f.value, uint8(f.kind), "the value of %v", f.kind)
	}
	// A record's encoding holds the number itself, after the version byte.
	b, err := worklease.Record{Kind: worklease.EventProcessed, Domain: "d", Offset: 1}.MarshalBinary()
	require.NoError(t, err)
	assert.Equal(t, byte(3), b[1], "the kind byte of a Processed record")
}
