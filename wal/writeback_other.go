//go:build !(linux && (amd64 || arm64))

package wal

// startWriteBack does nothing here: only Linux can start a write-back
// without waiting for it, and this package calls sync_file_range only where
// its arguments fit one register each (amd64 and arm64). The background
// fsync then has more to write.
func (f osFile) startWriteBack(off, n int64) error { return nil }
