//go:build !(linux && (amd64 || arm64))

package wal

// startWriteBack does nothing here: only Linux can start a write-back
// without waiting for it. The background fsync then has more to write.
func (f osFile) startWriteBack(off, n int64) error { return nil }
