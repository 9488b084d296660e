package wal

import (
	"io"
	"io/fs"
	"os"
	"runtime"
)

// fileSystem is every file-system operation the log performs. osFS
// implements it with package os; tests substitute an in-memory one that
// injects faults and simulates crashes. Names are full paths.
type fileSystem interface {
	// Create creates name with permission bits perm (before the umask), or
	// truncates it if it exists, keeping its mode, for reading and writing.
	Create(name string, perm fs.FileMode) (file, error)
	// Open opens an existing file for reading.
	Open(name string) (file, error)
	// OpenWrite opens an existing file for reading and writing.
	OpenWrite(name string) (file, error)
	// Rename renames oldname to newname, replacing newname if it exists.
	Rename(oldname, newname string) error
	// Remove removes a file.
	Remove(name string) error
	// ReadDir returns the names of the entries in dir, sorted. Its error
	// wraps fs.ErrNotExist when dir does not exist.
	ReadDir(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents with permission bits
	// perm (before the umask).
	MkdirAll(dir string, perm fs.FileMode) error
	// SyncDir makes the directory's entries durable: the files created,
	// renamed and removed in it.
	SyncDir(dir string) error
	// Lock takes an exclusive lock named by the file name, creating it with
	// permission bits perm if needed, until the returned Closer is closed.
	// Its error wraps ErrLocked when someone else holds the lock.
	Lock(name string, perm fs.FileMode) (io.Closer, error)
}

// A dirModer is a fileSystem whose directories have Unix permission bits,
// which Open checks. A fileSystem without it is not checked. (It is not
// part of fileSystem so that test file systems need not implement it.)
type dirModer interface {
	// DirMode returns the permission bits of dir, following symbolic
	// links, and ok false where the system has no such bits (Windows).
	DirMode(dir string) (perm fs.FileMode, ok bool, err error)
}

// sharedLocker is implemented by a fileSystem that can take shared locks, for
// read-only Logs. A fileSystem without it gives read-only Logs no lock at
// all. (It is not part of fileSystem so that test file systems need not
// implement it.)
type sharedLocker interface {
	// LockShared takes a shared lock on the existing file name, without
	// creating or changing it, until the returned Closer is closed. Shared
	// locks do not conflict with each other; they conflict with the lock
	// Lock takes. Its error wraps ErrLocked when someone holds that lock,
	// and fs.ErrNotExist when name does not exist.
	LockShared(name string) (io.Closer, error)
}

// file is an open file. The log reads and writes at explicit offsets only.
type file interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the file's data durable (fdatasync where available).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the file's size.
	Size() (int64, error)
	// Close closes the file.
	Close() error
}

// A writeBackStarter is a file that can start writing a range to its
// device without waiting for it (sync_file_range(2) on Linux), so that a
// later fsync of the range finds little left to write. It is a hint and
// makes nothing durable; an error it meets also reaches the next fsync, so
// callers may ignore its result. (It is not part of file so that test file
// systems need not implement it.)
type writeBackStarter interface {
	startWriteBack(off, n int64) error
}

// osFS is the operating system's file system.
type osFS struct{}

func (osFS) Create(name string, perm fs.FileMode) (file, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	return wrapOSFile(f, err)
}

func (osFS) Open(name string) (file, error) { return wrapOSFile(os.Open(name)) }

func (osFS) OpenWrite(name string) (file, error) {
	return wrapOSFile(os.OpenFile(name, os.O_RDWR, 0))
}

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for syncing; NTFS journals their entries
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) Lock(name string, perm fs.FileMode) (io.Closer, error) { return lockFile(name, perm) }

func (osFS) DirMode(dir string) (fs.FileMode, bool, error) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return 0, false, nil // no Unix permission bits; Stat makes them up
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, false, err
	}
	return fi.Mode().Perm(), true, nil
}

func (osFS) LockShared(name string) (io.Closer, error) { return lockFileShared(name) }

// osFile is an *os.File whose Sync is fdatasync where the system has it.
type osFile struct{ *os.File }

func wrapOSFile(f *os.File, err error) (file, error) {
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (f osFile) Sync() error { return datasync(f.File) }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
