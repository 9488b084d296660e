package wal_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/wal"
)

// The Manager on a journal. In these benchmarks an op is one cycle of an
// orchestrator: a TryAcquire that is granted, then a Succeed; two calls, each
// durable before it returns. Read them together:
//
//	go test -run='^$' -bench='BenchmarkManager' -benchtime=2s ./wal/
//
// BenchmarkManagerDurable's callers=64 against callers=1 is what group commit
// buys; BenchmarkManagerNoSync against BenchmarkManagerInMemory is the cost of
// journaling on the hot path when Wait does no I/O (building and encoding
// records; the write-behind goroutine checksums and writes them, on another
// core if there is one).

// managerCycle runs one granted TryAcquire plus Succeed. It panics on an
// unexpected outcome: b.Fatal may not be called off the benchmark's
// goroutine.
func managerCycle(m *worklease.Manager, domain string, offset int64) {
	res, err := m.TryAcquire(domain, offset)
	if err != nil || res.Status != worklease.Acquired {
		panic(fmt.Sprintf("TryAcquire(%q, %d) = %v, %v", domain, offset, res.Status, err))
	}
	if _, err := m.Succeed(domain, res.Token); err != nil {
		panic(err)
	}
}

// openManagerBench opens a log in a new directory and a Manager on it.
func openManagerBench(b *testing.B, opts ...wal.Option) (*worklease.Manager, *wal.Log) {
	b.Helper()
	l, err := wal.Open(b.TempDir(), opts...)
	require.NoError(b, err)
	m, err := worklease.New(worklease.WithJournal(l))
	require.NoError(b, err)
	return m, l
}

// BenchmarkManagerDurable runs cycles from 1, 8 and 64 goroutines, each on a
// domain of its own, under SyncAlways on the real file system. Every call
// waits for its fsync; concurrent calls share them (group commit), so
// fsyncs/op falls and ops/s grows with the callers (see reportFsyncs).
func BenchmarkManagerDurable(b *testing.B) {
	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			m, l := openManagerBench(b)
			syncs := l.Stats().Syncs
			b.ReportAllocs()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for c := range callers {
				domain := "caller-" + strconv.Itoa(c)
				wg.Go(func() {
					for offset := int64(0); next.Add(1) <= int64(b.N); offset++ {
						managerCycle(m, domain, offset)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			reportFsyncs(b, l, syncs)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			require.NoError(b, m.Close())
		})
	}
}

// BenchmarkManagerNoSync runs cycles on one domain, journaled under
// SyncNone: each call encodes its record into the log's buffer, and Wait
// returns without I/O; the write-behind goroutine fills in the records'
// CRCs and writes them to the operating system every 10ms, or sooner under
// load, without an fsync. The caller pays for the CRCs and the write only
// when it finds a megabyte buffered. Compare with BenchmarkManagerInMemory.
func BenchmarkManagerNoSync(b *testing.B) {
	m, _ := openManagerBench(b, wal.WithSyncMode(wal.SyncNone))
	benchmarkCycles(b, m)
	require.NoError(b, m.Close())
}

// BenchmarkManagerInMemory runs the cycles of BenchmarkManagerNoSync with no
// journal.
func BenchmarkManagerInMemory(b *testing.B) {
	m, err := worklease.New()
	require.NoError(b, err)
	benchmarkCycles(b, m)
	require.NoError(b, m.Close())
}

func benchmarkCycles(b *testing.B, m *worklease.Manager) {
	b.ReportAllocs()
	for offset := int64(0); b.Loop(); offset++ {
		managerCycle(m, "domain", offset)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkManagerReplay measures a restart: Open (which checks every record)
// and New (which decodes and applies every record) on a journal of 200,000
// cycles over 64 domains, after the record of its settings, with no
// snapshot. SetBytes counts the log's bytes.
func BenchmarkManagerReplay(b *testing.B) {
	const cycles, domains = 200_000, 64
	const records = 1 + 2*cycles // the journal's settings, then the cycles
	dir := b.TempDir()
	l, err := wal.Open(dir, wal.WithSyncMode(wal.SyncNone), wal.WithSnapshotEvery(0))
	require.NoError(b, err)
	m, err := worklease.New(worklease.WithJournal(l))
	require.NoError(b, err)
	for i := range cycles {
		managerCycle(m, "domain-"+strconv.Itoa(i%domains), int64(i/domains))
	}
	require.NoError(b, m.Close())
	l, err = wal.Open(dir)
	require.NoError(b, err)
	st := l.Stats()
	require.NoError(b, l.Close())
	require.Equal(b, uint64(records), st.LastSeq)
	require.Zero(b, st.SnapshotSeq)

	b.ReportAllocs()
	b.SetBytes(st.LogBytes)
	for b.Loop() {
		l, err := wal.Open(dir, wal.WithSnapshotEvery(0))
		if err != nil {
			b.Fatal(err)
		}
		m, err := worklease.New(worklease.WithJournal(l))
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	// Spot-check what was replayed.
	l, err = wal.Open(dir)
	require.NoError(b, err)
	m, err = worklease.New(worklease.WithJournal(l))
	require.NoError(b, err)
	info, err := m.Inspect("domain-0")
	require.NoError(b, err)
	require.Equal(b, int64(cycles/domains), info.Processed)
	require.NoError(b, m.Close())
}

// BenchmarkManagerProduce is the root package's BenchmarkProduce on a
// journaled Manager, under SyncNone: Enqueue of offsets the caller
// numbers, and Append, which the domain numbers, without a key and with a
// new key each call, each storing a 100-byte payload over 1,000 domains.
// The Manager is replaced, on a new log and off the clock, every 100,000
// calls. make bench compares Append with Enqueue.
func BenchmarkManagerProduce(b *testing.B) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = "domain-" + strconv.Itoa(i)
	}
	for _, call := range []string{"Enqueue", "Append", "AppendKey"} {
		b.Run("call="+call, func(b *testing.B) {
			payload := make([]byte, 100)
			next := make([]int64, len(names))
			var key []byte
			m, _ := openManagerBench(b, wal.WithSyncMode(wal.SyncNone))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i > 0 && i%100_000 == 0 {
					b.StopTimer()
					require.NoError(b, m.Close())
					m, _ = openManagerBench(b, wal.WithSyncMode(wal.SyncNone))
					clear(next)
					b.StartTimer()
				}
				d := i % len(names)
				var err error
				switch call {
				case "Enqueue":
					_, err = m.Enqueue(names[d], next[d], payload)
					next[d]++
				case "Append":
					_, err = m.Append(names[d], payload, worklease.AppendOptions{})
				case "AppendKey":
					key = strconv.AppendInt(key[:0], int64(i), 10)
					_, err = m.Append(names[d], payload, worklease.AppendOptions{Key: string(key)})
				}
				if err != nil {
					b.Fatalf("%s on %s: %v", call, names[d], err)
				}
			}
			b.StopTimer()
			require.NoError(b, m.Close())
		})
	}
}
