//go:build unix

package pg_test

import "syscall"

// killPID sends SIGKILL to the process pid.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
