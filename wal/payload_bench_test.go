package wal_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// BenchmarkPayloadBacklog reports what a deep backlog of payloads costs a
// journaled Manager in memory: a million offsets queued with 1 KiB
// payloads each, 1,000 on each of 1,000 domains, on a Log under SyncNone
// taking its snapshots as they fall due. The payloads' bytes stay in the
// journal's files, which the snapshots keep, and are read back as offsets
// are claimed; the heap holds the offsets and where their payloads are.
// heap-MiB is the live heap the backlog adds, once enqueued;
// heap-MiB-restarted is the live heap of a Manager reopened on the
// journal. The metrics are the point, not ns/op: run it once
// (-benchtime=1x), as make bench does; it writes about a gigabyte.
func BenchmarkPayloadBacklog(b *testing.B) {
	const domains, each, size = 1000, 1000, 1 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	names := make([]string, domains)
	for i := range names {
		names[i] = fmt.Sprintf("domain-%d", i)
	}
	for b.Loop() {
		dir := b.TempDir()
		var m *worklease.Manager
		enqueued := heapAfter(func() {
			j, err := wal.Open(dir, wal.WithSyncMode(wal.SyncNone))
			require.NoError(b, err)
			m, err = worklease.New(worklease.WithJournal(j))
			require.NoError(b, err)
			for off := range int64(each) {
				for _, d := range names {
					if st, err := m.Enqueue(d, off, payload); err != nil || st != worklease.Enqueued {
						b.Fatalf("Enqueue(%s, %d) = %v, %v", d, off, st, err)
					}
				}
			}
		})
		require.NoError(b, m.Close())
		m = nil // garbage before the restart is measured
		restarted := heapAfter(func() {
			j, err := wal.Open(dir, wal.WithSyncMode(wal.SyncNone))
			require.NoError(b, err)
			m, err = worklease.New(worklease.WithJournal(j))
			require.NoError(b, err)
		})
		// The payloads come back from the files.
		cs, err := m.Claim(3)
		require.NoError(b, err)
		require.Len(b, cs, 3)
		for _, c := range cs {
			require.Equal(b, payload, c.Payload, "%s/%d", c.Domain, c.Offset)
		}
		b.ReportMetric(float64(enqueued)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(restarted)/(1<<20), "heap-MiB-restarted")
		require.NoError(b, m.Close())
	}
}

// heapAfter returns how much the live heap grew while build ran, garbage
// collected before and after.
func heapAfter(build func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}
