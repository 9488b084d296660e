//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking flock(2) on name, creating it
// with permission bits perm if needed. flock locks belong to the open file description, so a second Open
// in the same process conflicts too. Closing the returned file, or the
// process exiting, releases the lock.
func lockFile(name string, perm fs.FileMode) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	return flock(f, syscall.LOCK_EX)
}

// lockFileShared takes a shared, non-blocking flock(2) on the existing file
// name, which it opens read-only: it conflicts with lockFile's lock, in this
// process or another, but not with other shared locks.
func lockFileShared(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return flock(f, syscall.LOCK_SH)
}

// flock locks f with how (LOCK_EX or LOCK_SH), without blocking, and returns
// f, whose Close releases the lock. On failure it closes f.
func flock(f *os.File, how int) (io.Closer, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), how|syscall.LOCK_NB)
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
			return nil, fmt.Errorf("%w: %s is locked", ErrLocked, f.Name())
		}
		return nil, &os.PathError{Op: "flock", Path: f.Name(), Err: lerr}
	}
	return f, nil
}
