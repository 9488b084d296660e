package wal

import (
	"io"
	"io/fs"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Log asks its file system for private modes for everything it
// creates, the directory, its lock, segments and snapshots, and for the
// group's read access WithGroupAccess; whatever the system's umask.
func TestCreateModes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		opts          []Option
		dirMode, file fs.FileMode
	}{
		{"default", nil, 0o700, 0o600},
		{"WithGroupAccess", []Option{WithGroupAccess()}, 0o750, 0o640},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := newMemFS()
			var mu sync.Mutex
			asked := map[opKind][]fs.FileMode{}
			fsys.setFault(func(op memOp) error {
				if op.kind == opCreate || op.kind == opMkdir || op.kind == opLock {
					mu.Lock()
					asked[op.kind] = append(asked[op.kind], op.perm)
					mu.Unlock()
				}
				return nil
			})
			l := mustOpenMem(t, fsys, append(tt.opts, WithSegmentSize(MinSegmentSize))...)
			for range 40 { // more than a segment holds
				seq, err := l.Append(1, make([]byte, 100))
				require.NoError(t, err)
				require.NoError(t, l.Wait(seq))
			}
			require.NoError(t, l.WriteSnapshot(l.last.Load(), func(w io.Writer) error {
				_, err := io.WriteString(w, "state")
				return err
			}))
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, []fs.FileMode{tt.dirMode}, asked[opMkdir])
			require.Equal(t, []fs.FileMode{tt.file}, asked[opLock])
			require.Greater(t, len(asked[opCreate]), 2, "segments and a snapshot")
			for _, perm := range asked[opCreate] {
				require.Equal(t, tt.file, perm)
			}
		})
	}
}
