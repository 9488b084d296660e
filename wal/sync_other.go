//go:build !linux

package wal

import "os"

// datasync flushes f to stable storage with (*os.File).Sync, which is fsync(2)
// on most systems and F_FULLFSYNC on macOS.
func datasync(f *os.File) error { return f.Sync() }
