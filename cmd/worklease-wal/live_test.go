package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// The tool reads a journal that a running Manager holds: what it prints is
// the state after some prefix of the Manager's calls, while the Manager
// goes on writing, rotating segments and taking snapshots, and the Manager
// opens nothing it could not.
func TestReadsALiveJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	l, err := wal.Open(dir, wal.WithSegmentSize(wal.MinSegmentSize), wal.WithSnapshotEvery(16<<10))
	require.NoError(t, err)
	m, err := worklease.New(worklease.WithJournal(l))
	require.NoError(t, err)
	defer m.Close()

	// One domain's offsets, processed in order, one call at a time: every
	// prefix of the journal has processed 0 to some n.
	const total = 3000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for off := range int64(total) {
			res, err := m.TryAcquire("live", off)
			if err != nil || res.Status != worklease.Acquired {
				panic(fmt.Sprint(res, err))
			}
			if _, err := m.Succeed("live", res.Token); err != nil {
				panic(err)
			}
		}
	}()
	last := -1
	for i := 0; i < 20; i++ {
		code, out, errOut := runTool("domains", "-json", dir)
		require.Equal(t, 0, code, errOut)
		if strings.TrimSpace(out) == "" {
			continue // nothing journaled yet
		}
		processed := jsonField(t, out, "processed")
		assert.GreaterOrEqual(t, processed, last, "a later read shows a later prefix")
		last = processed
	}
	wg.Wait()
	code, out, errOut := runTool("domains", "-json", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, total, jsonField(t, out, "processed"))
	code, _, errOut = runTool("verify", dir)
	require.Equal(t, 0, code, errOut)
}

// jsonField returns the number under key in a line of JSON output.
func jsonField(t *testing.T, out, key string) int {
	t.Helper()
	_, rest, ok := strings.Cut(out, `"`+key+`":`)
	require.True(t, ok, "no %s in %s", key, out)
	end := strings.IndexAny(rest, ",}")
	n, err := strconv.Atoi(rest[:end])
	require.NoError(t, err)
	return n
}
