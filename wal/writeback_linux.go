//go:build linux && (amd64 || arm64)

package wal

import "syscall"

// startWriteBack starts writing f's bytes [off, off+n) to the device with
// sync_file_range(2), without waiting: SYNC_FILE_RANGE_WRITE alone neither
// waits for the write nor reports earlier write errors, which the next
// fdatasync reports. (On these architectures the system call takes its
// arguments in this order, each in one register.)
func (f osFile) startWriteBack(off, n int64) error {
	return fdCall(f.File, "sync_file_range", func(fd uintptr) error {
		_, _, errno := syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, fd, uintptr(off), uintptr(n), syncFileRangeWrite, 0, 0)
		if errno != 0 {
			return errno
		}
		return nil
	})
}

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE, which the syscall package
// does not name.
const syncFileRangeWrite = 2
