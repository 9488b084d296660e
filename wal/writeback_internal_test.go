package wal

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeBackFS is a memFS whose files record the write-backs started on
// them, as osFS's files start them with sync_file_range.
type writeBackFS struct {
	*memFS
	mu      sync.Mutex
	started map[string][][2]int64 // by the name a file was opened under: [from, to) ranges, in order
	// congested, if not nil, holds every write-back until it is closed,
	// as sync_file_range waits while the device's queue is full.
	congested chan struct{}
}

func newWriteBackFS() *writeBackFS {
	return &writeBackFS{memFS: newMemFS(), started: map[string][][2]int64{}}
}

func (w *writeBackFS) Create(name string, perm fs.FileMode) (file, error) {
	return w.wrap(name)(w.memFS.Create(name, perm))
}

func (w *writeBackFS) OpenWrite(name string) (file, error) {
	return w.wrap(name)(w.memFS.OpenWrite(name))
}

func (w *writeBackFS) wrap(name string) func(file, error) (file, error) {
	return func(f file, err error) (file, error) {
		if err != nil {
			return nil, err
		}
		return &writeBackFile{file: f, fs: w, name: name}, nil
	}
}

// ranges returns the write-backs started on files whose name contains
// substr, by file name.
func (w *writeBackFS) ranges(substr string) map[string][][2]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][][2]int64{}
	for name, rs := range w.started {
		if bytes.Contains([]byte(name), []byte(substr)) {
			out[name] = append([][2]int64(nil), rs...)
		}
	}
	return out
}

type writeBackFile struct {
	file
	fs   *writeBackFS
	name string
}

func (f *writeBackFile) startWriteBack(off, n int64) error {
	size, err := f.Size()
	if err != nil {
		return err
	}
	if off < 0 || n <= 0 || off+n > size {
		panic("write-back of bytes the file does not hold") // the test then fails loudly
	}
	f.fs.mu.Lock()
	f.fs.started[f.name] = append(f.fs.started[f.name], [2]int64{off, off + n})
	f.fs.mu.Unlock()
	if f.fs.congested != nil {
		<-f.fs.congested
	}
	return nil
}

// TestStartWriteBack checks that SyncNone's goroutine starts the write-back
// of what it writes once writeBackBytes have gathered, in contiguous ranges
// from each segment's start, and that the other modes, which fsync anyway,
// start none.
func TestStartWriteBack(t *testing.T) {
	t.Parallel()
	payload := bytes.Repeat([]byte("x"), 48<<10)
	for _, c := range []struct {
		name string
		mode SyncMode
		want bool
	}{
		{"none", SyncNone, true},
		{"interval", SyncInterval(time.Hour), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				opt, tick, _ := manualTicker()
				fsys := newWriteBackFS()
				// Segments of 1 MiB: the test crosses into a second one.
				l, err := Open(dir, withFS(fsys), WithSyncMode(c.mode), WithSegmentSize(1<<20), opt)
				require.NoError(t, err)
				defer func() { require.NoError(t, l.Close()) }()
				write := func(n int) {
					for range n {
						_, err := l.Append(1, payload)
						require.NoError(t, err)
					}
					tick <- time.Now()
					synctest.Wait()
				}

				write(2) // 96 KiB: less than writeBackBytes
				require.Empty(t, fsys.ranges(segmentSuffix), "nothing started below writeBackBytes")
				for range 10 { // 1.9 MiB more, in batches of 192 KiB
					write(4)
				}
				ranges := fsys.ranges(segmentSuffix)
				if !c.want {
					require.Empty(t, ranges)
					return
				}
				require.GreaterOrEqual(t, len(ranges), 2, "every segment")
				for name, rs := range ranges {
					require.Equal(t, int64(0), rs[0][0], "%s: from its start", name)
					for i := 1; i < len(rs); i++ {
						require.Equal(t, rs[i-1][1], rs[i][0], "%s: contiguous", name)
					}
					for _, r := range rs {
						require.GreaterOrEqual(t, r[1]-r[0], int64(writeBackBytes), "%s: at least writeBackBytes at a time", name)
					}
				}
			})
		})
	}
}

// TestWriteBackLeavesWritesGoing checks that a write-back that waits, as
// sync_file_range does for a congested device, holds up neither the
// write-behind goroutine nor the callers: SyncNone's writes go on while it
// waits.
func TestWriteBackLeavesWritesGoing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opt, tick, _ := manualTicker()
		fsys := newWriteBackFS()
		fsys.congested = make(chan struct{})
		l, err := Open(dir, withFS(fsys), WithSyncMode(SyncNone), opt)
		require.NoError(t, err)
		payload := bytes.Repeat([]byte("x"), 48<<10)
		write := func(n int) uint64 {
			var seq uint64
			for range n {
				seq, err = l.Append(1, payload)
				require.NoError(t, err)
			}
			tick <- time.Now()
			synctest.Wait()
			return seq
		}

		write(8) // 384 KiB: the write-back of the first 256 KiB starts, and waits
		require.Len(t, fsys.ranges(segmentSuffix), 1, "a write-back started")
		for range 3 {
			last := write(8)
			require.Equal(t, last, l.Stats().Written, "written while a write-back waits")
		}
		close(fsys.congested)
		require.NoError(t, l.Close())
	})
}

// TestOSFileStartWriteBack checks the real thing on a file of the operating
// system: it succeeds on an open file, and fails without harm once the file
// is closed, which a rotation can do while syncBehind looks.
func TestOSFileStartWriteBack(t *testing.T) {
	t.Parallel()
	f, err := osFS{}.Create(filepath.Join(t.TempDir(), "f"), 0o600)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte("x"), 1<<20), 0)
	require.NoError(t, err)
	wb, ok := f.(writeBackStarter)
	require.True(t, ok, "osFS files start write-backs")
	assert.NoError(t, wb.startWriteBack(0, 1<<20))
	require.NoError(t, f.Close())
	err = wb.startWriteBack(0, 1<<20)
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		assert.Error(t, err)
	} else {
		assert.NoError(t, err, "a no-op elsewhere")
	}
}
