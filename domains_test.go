package worklease_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/internal/memjournal"
)

// TestDomainsReplay checks that a Manager rebuilt from its journal, from a
// snapshot and the records after it, knows the same domains, and that
// Domains journals nothing.
func TestDomainsReplay(t *testing.T) {
	t.Parallel()
	j := &memjournal.Journal{}
	m, err := worklease.New(worklease.WithJournal(j))
	require.NoError(t, err)
	for i := range 5 {
		_, err := m.TryAcquire(fmt.Sprintf("d%d", 4-i), int64(i))
		require.NoError(t, err)
	}
	require.NoError(t, m.Snapshot())
	require.NoError(t, m.Pause("after-snapshot"))
	_, err = m.Resume("after-snapshot")
	require.NoError(t, err)
	require.NoError(t, m.Forget("after-snapshot"))
	require.NoError(t, m.Pause("kept"))
	want, err := m.Domains()
	require.NoError(t, err)
	assert.Equal(t, []string{"d0", "d1", "d2", "d3", "d4", "kept"}, want)
	seqs, _ := j.Records()
	require.NoError(t, m.Close())

	m, err = worklease.New(worklease.WithJournal(j.Reopen()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	got, err := m.Domains()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	after, _ := j.Records()
	assert.Equal(t, seqs, after, "Domains writes no record")
}

// TestDomainsConcurrent lists domains while others are created and
// forgotten: every listing is sorted, without duplicates, and holds every
// domain that existed throughout.
func TestDomainsConcurrent(t *testing.T) {
	t.Parallel()
	m, err := worklease.New(worklease.WithShards(4))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Pause("stable"))

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d := fmt.Sprintf("churn-%d", i%50)
			if err := m.Pause(d); err != nil {
				t.Error(err)
				return
			}
			if err := m.Forget(d); err != nil && !errors.Is(err, worklease.ErrDomainBusy) {
				t.Error(err)
				return
			}
		}
	})
	for range 200 {
		ds, err := m.Domains()
		require.NoError(t, err)
		assert.IsIncreasing(t, ds)
		assert.Contains(t, ds, "stable")
	}
	close(stop)
	wg.Wait()
}
