package wal

import (
	"os"
	"syscall"
)

// datasync flushes f's data, and the metadata needed to read it back (such as
// its size), with fdatasync(2): one disk flush, without the inode timestamps.
func datasync(f *os.File) error {
	return fdCall(f, "fdatasync", func(fd uintptr) error { return syscall.Fdatasync(int(fd)) })
}

// fdCall runs call on f's file descriptor, again for as long as it fails
// with EINTR, and returns its error as an *os.PathError naming op. The
// descriptor stays open until call returns, even if f is closed meanwhile;
// on a closed f, fdCall fails without calling it.
func fdCall(f *os.File, op string, call func(fd uintptr) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if cerr = call(fd); cerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if cerr != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: cerr}
	}
	return nil
}
