//go:build unix

package pg_test

import "syscall"

// killPID sends SIGKILL to the process pid.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// pausePID stops the process pid until resumePID (SIGSTOP).
func pausePID(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

// resumePID lets the process pid stopped by pausePID run on (SIGCONT).
func resumePID(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
