//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package wal

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// On systems without flock(2), the lock only keeps Logs of this process from
// opening one directory at odds (two writable Logs, or a writable and a
// read-only one); it does not exclude other processes.
var (
	lockedMu sync.Mutex
	locked   = map[string]int{} // absolute lock file names held by this process: -1 exclusively, n > 0 by n shared holders
)

type processLock struct {
	name string
	f    *os.File
}

func (l *processLock) Close() error {
	lockedMu.Lock()
	if locked[l.name] > 1 {
		locked[l.name]--
	} else {
		delete(locked, l.name)
	}
	lockedMu.Unlock()
	return l.f.Close()
}

// lockFile creates name with permission bits perm if needed and registers
// it as held exclusively by this process.
func lockFile(name string, perm fs.FileMode) (io.Closer, error) {
	return processLockFile(name, true, perm)
}

// lockFileShared opens the existing file name read-only and registers it as
// shared by one more holder in this process.
func lockFileShared(name string) (io.Closer, error) {
	return processLockFile(name, false, 0)
}

func processLockFile(name string, exclusive bool, perm fs.FileMode) (io.Closer, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	lockedMu.Lock()
	defer lockedMu.Unlock()
	if n := locked[abs]; n < 0 || (exclusive && n > 0) {
		return nil, fmt.Errorf("%w: %s is locked", ErrLocked, name)
	}
	var f *os.File
	if exclusive {
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE, perm)
	} else {
		f, err = os.Open(name)
	}
	if err != nil {
		return nil, err
	}
	if exclusive {
		locked[abs] = -1
	} else {
		locked[abs]++
	}
	return &processLock{name: abs, f: f}, nil
}
