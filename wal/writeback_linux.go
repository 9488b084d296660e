//go:build linux && (amd64 || arm64)

package wal

import (
	"os"
	"syscall"
)

// startWriteBack starts writing f's bytes [off, off+n) to the device with
// sync_file_range(2), without waiting: SYNC_FILE_RANGE_WRITE alone neither
// waits for the write nor reports earlier write errors, which the next
// fdatasync reports. (On these architectures the system call takes its
// arguments in this order, each in one register.)
func (f osFile) startWriteBack(off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			_, _, errno := syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, fd, uintptr(off), uintptr(n), syncFileRangeWrite, 0, 0)
			if errno != syscall.EINTR {
				if errno != 0 {
					serr = errno
				}
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: serr}
	}
	return nil
}

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE, which the syscall package
// does not name.
const syncFileRangeWrite = 2
