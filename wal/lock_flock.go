//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking flock(2) on name, creating it if
// needed. flock locks belong to the open file description, so a second Open
// in the same process conflicts too. Closing the returned file, or the
// process exiting, releases the lock.
func lockFile(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		f.Close()
		return nil, err
	}
	if lerr != nil {
		f.Close()
		if errors.Is(lerr, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked", ErrLocked, name)
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: lerr}
	}
	return f, nil
}
