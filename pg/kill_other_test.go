//go:build !unix

package pg_test

import "os"

// killPID ends the process pid at once.
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
