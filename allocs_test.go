package worklease_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// discardJournal takes every record and keeps none: a journal that costs a
// call nothing of its own, so that what a journaled call allocates is the
// Manager's.
type discardJournal struct{ seq uint64 }

func (j *discardJournal) AppendRecord(worklease.Record) (uint64, error) {
	j.seq++
	return j.seq, nil
}
func (j *discardJournal) Wait(uint64) error { return nil }
func (j *discardJournal) ReplayRecords(func([]byte) error, func(uint64, worklease.Record) error) error {
	return nil
}
func (j *discardJournal) SnapshotState(func(io.Writer) error) error { return nil }
func (j *discardJournal) SnapshotDue() bool                         { return false }
func (j *discardJournal) Close() error                              { return nil }

// TestReportingCallsDoNotAllocate checks that a Manager that reports its
// changes, to an observer or a journal, keeps them on the call's stack: a
// cycle allocates nothing, as it does without either (see stepBuffer). It is
// not parallel: testing.AllocsPerRun counts every goroutine's allocations.
func TestReportingCallsDoNotAllocate(t *testing.T) {
	tests := []struct {
		name string
		opt  worklease.Option
	}{
		{"observer", worklease.WithObserver(worklease.ObserverFunc(func(worklease.Event) {}))},
		{"journal", worklease.WithJournal(&discardJournal{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := worklease.New(tt.opt)
			require.NoError(t, err)
			defer m.Close()
			offset := int64(0)
			cycle := func() {
				res, err := m.TryAcquire("d", offset)
				if err != nil || res.Status != worklease.Acquired {
					t.Fatalf("TryAcquire(d, %d) = %v, %v", offset, res.Status, err)
				}
				if _, err := m.Succeed("d", res.Token); err != nil {
					t.Fatal(err)
				}
				offset++
			}
			cycle() // the domain's record, and the observer's queue, are made once
			require.Zero(t, testing.AllocsPerRun(1000, cycle))
		})
	}
}
