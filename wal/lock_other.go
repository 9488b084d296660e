//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package wal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// On systems without flock(2), the lock only keeps two Logs of this process
// from opening one directory; it does not exclude other processes.
var (
	lockedMu sync.Mutex
	locked   = map[string]bool{} // absolute lock file names held by this process
)

type processLock struct {
	name string
	f    *os.File
}

func (l *processLock) Close() error {
	lockedMu.Lock()
	delete(locked, l.name)
	lockedMu.Unlock()
	return l.f.Close()
}

// lockFile creates name if needed and registers it as held by this process.
func lockFile(name string) (io.Closer, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	lockedMu.Lock()
	defer lockedMu.Unlock()
	if locked[abs] {
		return nil, fmt.Errorf("%w: %s is locked", ErrLocked, name)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	locked[abs] = true
	return &processLock{name: abs, f: f}, nil
}
