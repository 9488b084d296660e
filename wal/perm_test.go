//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package wal_test

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease/wal"
)

// Tests of the modes a Log creates its directory and files with, and of the
// refusal of a directory that other users may write to. They set the
// process's umask, so they do not run in parallel: the package's parallel
// tests start only once every sequential test has returned.

// withUmask runs f with the process's umask set to mask.
func withUmask(t *testing.T, mask int, f func()) {
	t.Helper()
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

// fillLog opens a log in dir with opts, appends to it, writes a snapshot and
// closes it, so that every kind of file a Log creates is there.
func fillLog(t *testing.T, dir string, opts ...wal.Option) {
	t.Helper()
	l, err := wal.Open(dir, opts...)
	require.NoError(t, err)
	appendWait(t, l, "a", "b")
	require.NoError(t, l.WriteSnapshot(2, func(w io.Writer) error {
		_, err := io.WriteString(w, "state")
		return err
	}))
	appendWait(t, l, "c")
	require.NoError(t, l.Close())
}

// modes returns the permission bits of dir and of every file in it, by name
// ("." for dir).
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := make(map[string]fs.FileMode)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	out["."] = fi.Mode().Perm()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		out[e.Name()] = fi.Mode().Perm()
	}
	return out
}

// A new log is private: its directory, and any parent Open creates, 0700,
// every file 0600, whatever the umask allows beyond that; WithGroupAccess
// lets the group read them: 0750 and 0640.
func TestOpenCreatesPrivateFiles(t *testing.T) {
	for _, tt := range []struct {
		name          string
		opts          []wal.Option
		dirMode, file fs.FileMode
	}{
		{"default", nil, 0o700, 0o600},
		{"WithGroupAccess", []wal.Option{wal.WithGroupAccess()}, 0o750, 0o640},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "parent")
			dir := filepath.Join(parent, "log")
			withUmask(t, 0, func() { fillLog(t, dir, tt.opts...) })
			got := modes(t, dir)
			require.GreaterOrEqual(t, len(got), 4, "the directory, LOCK, a segment and the snapshot: %v", got)
			for name, mode := range got {
				want := tt.file
				if name == "." {
					want = tt.dirMode
				}
				require.Equal(t, want, mode, "%s: got %v, want %v", name, mode, want)
			}
			fi, err := os.Stat(parent)
			require.NoError(t, err)
			require.Equal(t, tt.dirMode, fi.Mode().Perm(), "a parent Open creates")
		})
	}
}

// A journal an older release created, a world-readable directory of
// world-readable files, keeps opening, and its modes are left alone.
func TestOpenKeepsExistingModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	fillLog(t, dir)
	require.NoError(t, os.Chmod(dir, 0o755))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.Chmod(filepath.Join(dir, e.Name()), 0o644))
	}
	before := modes(t, dir)
	l, err := wal.Open(dir)
	require.NoError(t, err)
	got := replayAll(t, l)
	require.Equal(t, "state", got.SnapData)
	require.Len(t, got.Records, 1)
	appendWait(t, l, "d")
	require.NoError(t, l.Close())
	after := modes(t, dir)
	for name, mode := range before {
		require.Equal(t, mode, after[name], "%s", name)
	}
}

// Open refuses a directory that other users may write to, since they could
// replace or remove the log's files, and creates nothing in it; a read-only
// Open, which writes nothing, opens it.
func TestOpenRefusesDirWritableByOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	fillLog(t, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, "LOCK")))
	require.NoError(t, os.Chmod(dir, 0o757))
	before := dirBytes(t, dir)

	_, err := wal.Open(dir)
	require.ErrorIs(t, err, wal.ErrWritableByOthers)
	require.ErrorContains(t, err, "chmod o-w")
	require.Equal(t, before, dirBytes(t, dir), "nothing created or changed")

	l, err := wal.Open(dir, wal.WithReadOnly())
	require.NoError(t, err)
	require.NoError(t, l.Close())

	require.NoError(t, os.Chmod(dir, 0o755))
	l, err = wal.Open(dir)
	require.NoError(t, err)
	require.NoError(t, l.Close())
}
