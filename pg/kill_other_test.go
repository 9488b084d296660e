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

// pausePID does nothing here: the process runs on while the test looks at
// it (see killWorking).
func pausePID(int) error { return nil }

// resumePID does nothing here (see pausePID).
func resumePID(int) error { return nil }
