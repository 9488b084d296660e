package wal_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease/wal"
)

// BenchmarkAppendWait measures durable appends (Append then Wait, under
// SyncAlways, on the real file system) from 1, 8 and 64 concurrent callers.
// Group commit makes the callers share fsyncs: fsyncs/op falls as callers
// rise, and records/s grows with them.
func BenchmarkAppendWait(b *testing.B) {
	payload := make([]byte, 100)
	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			l, err := wal.Open(b.TempDir())
			require.NoError(b, err)
			syncs := l.Stats().Syncs
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						seq, err := l.Append(1, payload)
						if err != nil {
							panic(err) // b.Fatal may not run off the benchmark's goroutine
						}
						if err := l.Wait(seq); err != nil {
							panic(err)
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			reportFsyncs(b, l, syncs)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			require.NoError(b, l.Close())
		})
	}
}

// reportFsyncs reports the fsyncs l made since its Stats counted before:
// per op, which group commit brings down as callers rise, and per second,
// which shows how near the disk's own rate of flushes the log runs.
func reportFsyncs(b *testing.B, l *wal.Log, before uint64) {
	fsyncs := float64(l.Stats().Syncs - before)
	b.ReportMetric(fsyncs/float64(b.N), "fsyncs/op")
	b.ReportMetric(fsyncs/b.Elapsed().Seconds(), "fsyncs/s")
}

// BenchmarkAppend measures the cost of buffering a record, without waiting.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{16, 256} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			l, err := wal.Open(b.TempDir(), wal.WithSyncMode(wal.SyncNone))
			require.NoError(b, err)
			payload := make([]byte, size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Append(1, payload); err != nil {
						panic(err)
					}
				}
			})
			b.StopTimer()
			require.NoError(b, l.Close())
		})
	}
}

// BenchmarkReplay measures reading a log back: each op replays every record.
// SetBytes counts the payload bytes; records/s counts the records.
func BenchmarkReplay(b *testing.B) {
	for _, size := range []int{16, 128, 1024} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			records := 100_000
			if size >= 1024 {
				records = 20_000
			}
			dir := b.TempDir()
			l, err := wal.Open(dir, wal.WithSyncMode(wal.SyncNone))
			require.NoError(b, err)
			payload := make([]byte, size)
			for range records {
				_, err := l.Append(1, payload)
				require.NoError(b, err)
			}
			require.NoError(b, l.Close())
			l, err = wal.Open(dir)
			require.NoError(b, err)

			b.ReportAllocs()
			b.SetBytes(int64(records * size))
			for b.Loop() {
				n := 0
				if err := l.Replay(nil, func(uint64, uint8, []byte) error {
					n++
					return nil
				}); err != nil || n != records {
					b.Fatalf("replayed %d of %d records: %v", n, records, err)
				}
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			require.NoError(b, l.Close())
		})
	}
}

// BenchmarkOpen measures recovery: opening a log checks every record.
func BenchmarkOpen(b *testing.B) {
	const records = 100_000
	dir := b.TempDir()
	l, err := wal.Open(dir, wal.WithSyncMode(wal.SyncNone))
	require.NoError(b, err)
	payload := make([]byte, 64)
	for range records {
		_, err := l.Append(1, payload)
		require.NoError(b, err)
	}
	require.NoError(b, l.Close())
	b.ReportAllocs()
	b.SetBytes(records * int64(len(payload)))
	for b.Loop() {
		l, err := wal.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
