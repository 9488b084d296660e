package wal

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// memFS is an in-memory fileSystem that injects faults and simulates crashes.
//
// It keeps, for every file, what was synced and the writes since, and for the
// directory, the entries made durable by SyncDir and the creates, renames and
// removes since. Every mutating operation is logged in order, so crashAt can
// rebuild the state after any prefix of the operations and then crash it:
// unsynced data and directory changes are dropped, or a prefix of them kept.
// Directories created by MkdirAll are durable at once.
type memFS struct {
	mu    sync.Mutex
	base  *memState            // the state before the first logged operation; never changes
	st    *memState            // the current state
	log   []memOp              // every mutating operation, in order
	locks map[string]bool      // names held by Lock
	open  int                  // open file handles
	fault func(op memOp) error // decides each operation's outcome; see setFault
}

// opKind names a file-system operation. The ones up to opDrop change state
// and are logged; the others are offered to faults only.
type opKind uint8

const (
	opInvalid opKind = iota
	opMkdir
	opCreate
	opWrite
	opTruncate
	opSync
	opRename
	opRemove
	opSyncDir
	opPut  // a test sets a file's content, durably
	opDrop // a test removes a file, durably
	opOpen
	opRead
	opReadDir
	opLock
	opClose
)

var opNames = [...]string{"invalid", "mkdir", "create", "write", "truncate", "sync", "rename", "remove", "syncdir", "put", "drop", "open", "read", "readdir", "lock", "close"}

func (k opKind) String() string { return opNames[k] }

// A memOp is one operation. For a write, data is what was written; ino
// identifies the file for writes, truncates and syncs.
type memOp struct {
	kind  opKind
	path  string // the file, or the directory for opMkdir, opReadDir and opSyncDir
	path2 string // the new name, for opRename
	ino   int
	off   int64
	data  []byte
	size  int64
	perm  fs.FileMode // the mode asked for, for opCreate, opMkdir and opLock
}

func (op memOp) String() string {
	return fmt.Sprintf("%v %s%s (ino %d, off %d, %d bytes)", op.kind, filepath.Base(op.path), op.path2, op.ino, op.off, len(op.data))
}

// errShort is returned by a fault to make a write apply only its first keep
// bytes before failing with err.
type errShort struct {
	keep int
	err  error
}

func (e *errShort) Error() string { return fmt.Sprintf("short write of %d bytes: %v", e.keep, e.err) }
func (e *errShort) Unwrap() error { return e.err }

type memInode struct {
	data    []byte
	synced  []byte
	pending []memOp // writes and truncates since the last sync
}

type memState struct {
	dirs    map[string]bool
	names   map[string]int // entries as the running system sees them
	durable map[string]int // entries as of the last SyncDir
	pending []memOp        // creates, renames and removes since the last SyncDir
	inodes  map[int]*memInode
	nextIno int
}

func newMemState() *memState {
	return &memState{dirs: map[string]bool{}, names: map[string]int{}, durable: map[string]int{}, inodes: map[int]*memInode{}}
}

func newMemFS() *memFS { return fromState(newMemState()) }

// fromState returns a memFS whose state starts as st.
func fromState(st *memState) *memFS {
	return &memFS{base: st.clone(), st: st, locks: map[string]bool{}}
}

// clone returns a deep copy of st.
func (st *memState) clone() *memState {
	c := &memState{
		dirs:    maps.Clone(st.dirs),
		names:   maps.Clone(st.names),
		durable: maps.Clone(st.durable),
		pending: slices.Clone(st.pending),
		inodes:  make(map[int]*memInode, len(st.inodes)),
		nextIno: st.nextIno,
	}
	for ino, in := range st.inodes {
		c.inodes[ino] = &memInode{data: slices.Clone(in.data), synced: slices.Clone(in.synced), pending: slices.Clone(in.pending)}
	}
	return c
}

// apply performs a logged operation and returns it completed (a create's
// inode filled in).
func (st *memState) apply(op memOp) memOp {
	switch op.kind {
	case opMkdir:
		for d := op.path; ; d = filepath.Dir(d) {
			st.dirs[d] = true
			if d == filepath.Dir(d) {
				break
			}
		}
	case opCreate:
		if ino, ok := st.names[op.path]; ok { // O_TRUNC: same inode, emptied
			op.ino = ino
			st.apply(memOp{kind: opTruncate, ino: ino, size: 0})
			return op
		}
		st.nextIno++
		op.ino = st.nextIno
		st.inodes[op.ino] = &memInode{}
		st.names[op.path] = op.ino
		st.pending = append(st.pending, op)
	case opWrite:
		in := st.inodes[op.ino]
		in.data = writeAt(in.data, op.data, op.off)
		in.pending = append(in.pending, op)
	case opTruncate:
		in := st.inodes[op.ino]
		in.data = truncate(in.data, op.size)
		in.pending = append(in.pending, op)
	case opSync:
		in := st.inodes[op.ino]
		in.synced = slices.Clone(in.data)
		in.pending = nil
	case opRename:
		op.ino = st.names[op.path]
		st.names[op.path2] = op.ino
		delete(st.names, op.path)
		st.pending = append(st.pending, op)
	case opRemove:
		op.ino = st.names[op.path]
		delete(st.names, op.path)
		st.pending = append(st.pending, op)
	case opPut:
		st.apply(memOp{kind: opMkdir, path: filepath.Dir(op.path)})
		st.nextIno++
		op.ino = st.nextIno
		st.inodes[op.ino] = &memInode{data: slices.Clone(op.data), synced: slices.Clone(op.data)}
		st.names[op.path] = op.ino
		st.durable[op.path] = op.ino
	case opDrop:
		delete(st.names, op.path)
		delete(st.durable, op.path)
	case opSyncDir:
		var keep []memOp
		for _, d := range st.pending {
			if filepath.Dir(d.path) == op.path {
				applyDirOp(st.durable, d)
			} else {
				keep = append(keep, d)
			}
		}
		st.pending = keep
	default:
		panic("memfs: not a logged operation: " + op.kind.String())
	}
	return op
}

func applyDirOp(names map[string]int, op memOp) {
	switch op.kind {
	case opCreate:
		names[op.path] = op.ino
	case opRename:
		names[op.path2] = op.ino
		delete(names, op.path)
	case opRemove:
		delete(names, op.path)
	}
}

func writeAt(data, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[off:], p)
	return data
}

func truncate(data []byte, size int64) []byte {
	if size <= int64(len(data)) {
		return data[:size]
	}
	return append(data, make([]byte, size-int64(len(data)))...)
}

// A crashMode says how much of what was not synced survives a crash.
type crashMode uint8

const (
	crashDropAll crashMode = iota + 1 // nothing unsynced survives
	crashKeepAll                      // everything survives, as if synced
	crashRandom                       // a random prefix survives, possibly ending inside a write
	crashReorder                      // a random subset of the writes survives, as when the kernel flushes pages out of order
)

func (m crashMode) String() string {
	return [...]string{"invalid", "drop-all", "keep-all", "random", "reorder"}[m]
}

// crash returns the state a crash leaves: the durable directory entries plus
// a prefix of the directory changes since, and for each surviving file its
// synced data plus a prefix of the writes since, or for crashReorder any
// subset of them, each possibly cut short. A file grown by a write that
// survives past one that does not reads as zeros in the gap.
func (st *memState) crash(mode crashMode, rng *rand.Rand) *memState {
	prefix := func(n int) int {
		switch mode {
		case crashDropAll:
			return 0
		case crashKeepAll:
			return n
		default:
			return rng.IntN(n + 1)
		}
	}
	ns := newMemState()
	ns.nextIno = st.nextIno
	for d := range st.dirs {
		ns.dirs[d] = true
	}
	names := maps.Clone(st.durable)
	for _, op := range st.pending[:prefix(len(st.pending))] {
		applyDirOp(names, op)
	}
	paths := slices.Sorted(maps.Keys(names))
	for _, p := range paths {
		ino := names[p]
		if _, done := ns.inodes[ino]; done {
			continue
		}
		in := st.inodes[ino]
		data := slices.Clone(in.synced)
		if mode == crashReorder {
			for _, op := range in.pending {
				switch {
				case op.kind == opTruncate:
					data = truncate(data, op.size)
				case rng.IntN(3) == 0: // lost
				case rng.IntN(3) == 0: // cut short
					data = writeAt(data, op.data[:rng.IntN(len(op.data)+1)], op.off)
				default:
					data = writeAt(data, op.data, op.off)
				}
			}
			ns.inodes[ino] = &memInode{data: data, synced: slices.Clone(data)}
			continue
		}
		k := prefix(len(in.pending))
		for _, op := range in.pending[:k] {
			if op.kind == opWrite {
				data = writeAt(data, op.data, op.off)
			} else {
				data = truncate(data, op.size)
			}
		}
		if mode == crashRandom && k < len(in.pending) && in.pending[k].kind == opWrite {
			op := in.pending[k]
			data = writeAt(data, op.data[:rng.IntN(len(op.data)+1)], op.off)
		}
		ns.inodes[ino] = &memInode{data: data, synced: slices.Clone(data)}
	}
	ns.names = names
	ns.durable = maps.Clone(names)
	return ns
}

// opCount returns how many mutating operations have run.
func (m *memFS) opCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.log)
}

// ops returns a copy of the operation log.
func (m *memFS) ops() []memOp {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// crashAt returns a new memFS holding what a crash after the first n
// operations leaves, as mode says; seed drives crashRandom.
func (m *memFS) crashAt(n int, mode crashMode, seed uint64) *memFS {
	return fromState(m.stateAt(n).crash(mode, rand.New(rand.NewPCG(seed, uint64(n)))))
}

// stateAt rebuilds the state after the first n logged operations.
func (m *memFS) stateAt(n int) *memState {
	m.mu.Lock()
	ops := slices.Clone(m.log[:n])
	st := m.base.clone()
	m.mu.Unlock()
	for _, op := range ops {
		if got := st.apply(op); got.ino != op.ino {
			panic(fmt.Sprintf("memfs: replaying %v gave inode %d", op, got.ino))
		}
	}
	return st
}

// processCrashAt returns a new memFS holding the state after the first n
// operations as a crash of the process, not the machine, leaves it: every
// write is there, and what was not synced is still not synced.
func (m *memFS) processCrashAt(n int) *memFS { return fromState(m.stateAt(n)) }

// crash returns a new memFS holding what a crash now leaves.
func (m *memFS) crash(mode crashMode, seed uint64) *memFS { return m.crashAt(m.opCount(), mode, seed) }

// setFault installs f, called before every operation (outside the memFS
// lock): a non-nil error fails the operation, and an *errShort fails a write
// after applying part of it. nil removes the fault.
func (m *memFS) setFault(f func(op memOp) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = f
}

// do runs op: it consults the fault, runs check (which may refuse the
// operation), then applies and logs op if it changes state. A failed
// operation does not happen, except that a failed short write applies the
// part kept and a failed close still closes.
func (m *memFS) do(op memOp, check func(st *memState) error) (memOp, error) {
	m.mu.Lock()
	fault := m.fault
	m.mu.Unlock()
	var ferr error
	if fault != nil {
		ferr = fault(op)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var short *errShort
	partial := op.kind == opWrite && asShort(ferr, &short) && short.keep > 0
	if ferr != nil && !partial && op.kind != opClose {
		return op, ferr
	}
	if check != nil {
		if err := check(m.st); err != nil {
			return op, err
		}
	}
	if partial {
		op.data = op.data[:min(short.keep, len(op.data))]
	}
	if op.kind <= opDrop {
		op = m.st.apply(op)
		m.log = append(m.log, op)
	}
	return op, ferr
}

func asShort(err error, target **errShort) bool {
	s, ok := err.(*errShort)
	if ok {
		*target = s
	}
	return ok
}

func notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) dirExists(name string) func(st *memState) error {
	return func(st *memState) error {
		if !st.dirs[filepath.Dir(name)] {
			return notExist("open", name)
		}
		return nil
	}
}

func (m *memFS) fileExists(op, name string) func(st *memState) error {
	return func(st *memState) error {
		if _, ok := st.names[name]; !ok {
			return notExist(op, name)
		}
		return nil
	}
}

func (m *memFS) Create(name string, perm fs.FileMode) (file, error) {
	op, err := m.do(memOp{kind: opCreate, path: name, perm: perm}, m.dirExists(name))
	if err != nil {
		return nil, err
	}
	return m.newFile(name, op.ino, true), nil
}

func (m *memFS) Open(name string) (file, error)      { return m.openFile(name, false) }
func (m *memFS) OpenWrite(name string) (file, error) { return m.openFile(name, true) }

func (m *memFS) openFile(name string, writable bool) (file, error) {
	if _, err := m.do(memOp{kind: opOpen, path: name}, m.fileExists("open", name)); err != nil {
		return nil, err
	}
	m.mu.Lock()
	ino := m.st.names[name]
	m.mu.Unlock()
	return m.newFile(name, ino, writable), nil
}

func (m *memFS) newFile(name string, ino int, writable bool) *memFile {
	m.mu.Lock()
	m.open++
	m.mu.Unlock()
	return &memFile{fs: m, name: name, ino: ino, writable: writable}
}

func (m *memFS) Rename(oldname, newname string) error {
	_, err := m.do(memOp{kind: opRename, path: oldname, path2: newname}, m.fileExists("rename", oldname))
	return err
}

func (m *memFS) Remove(name string) error {
	_, err := m.do(memOp{kind: opRemove, path: name}, m.fileExists("remove", name))
	return err
}

func (m *memFS) ReadDir(dir string) ([]string, error) {
	_, err := m.do(memOp{kind: opReadDir, path: dir}, func(st *memState) error {
		if !st.dirs[dir] {
			return notExist("readdir", dir)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for p := range m.st.names {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	slices.Sort(names)
	return names, nil
}

func (m *memFS) MkdirAll(dir string, perm fs.FileMode) error {
	_, err := m.do(memOp{kind: opMkdir, path: dir, perm: perm}, nil)
	return err
}

func (m *memFS) SyncDir(dir string) error {
	_, err := m.do(memOp{kind: opSyncDir, path: dir}, nil)
	return err
}

func (m *memFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	_, err := m.do(memOp{kind: opLock, path: name, perm: perm}, func(st *memState) error {
		if m.locks[name] {
			return fmt.Errorf("%w: %s", ErrLocked, name)
		}
		m.locks[name] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return closerFunc(func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.locks, name)
		return nil
	}), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// openFiles returns the number of open file handles.
func (m *memFS) openFiles() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open
}

// files returns the current content of every file in dir, by base name.
func (m *memFS) files(dir string) map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for p, ino := range m.st.names {
		if filepath.Dir(p) == dir {
			out[filepath.Base(p)] = slices.Clone(m.st.inodes[ino].data)
		}
	}
	return out
}

// fileNames returns the sorted base names of the files in dir.
func (m *memFS) fileNames(dir string) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for name := range m.files(dir) {
			if !yield(name) {
				return
			}
		}
	})
}

// setFile makes dir/name hold data, durably, replacing any file there.
func (m *memFS) setFile(dir, name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = append(m.log, m.st.apply(memOp{kind: opPut, path: filepath.Join(dir, name), data: slices.Clone(data)}))
}

// removeFile removes dir/name durably.
func (m *memFS) removeFile(dir, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = append(m.log, m.st.apply(memOp{kind: opDrop, path: filepath.Join(dir, name)}))
}

// countOps returns how many logged operations of kind touched a file whose
// name contains substr.
func (m *memFS) countOps(kind opKind, substr string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	paths := map[int]string{}
	n := 0
	for _, op := range m.log {
		if op.kind == opCreate {
			paths[op.ino] = op.path
		}
		p := op.path
		if op.kind == opWrite || op.kind == opSync || op.kind == opTruncate {
			p = paths[op.ino]
		}
		if op.kind == kind && strings.Contains(p, substr) {
			n++
		}
	}
	return n
}

// clone returns an independent copy of m's current state, everything
// durable, with an empty log.
func (m *memFS) clone() *memFS { return m.crash(crashKeepAll, 0) }

// memFile is an open handle on a memFS inode.
type memFile struct {
	fs       *memFS
	name     string
	ino      int
	writable bool
	closed   bool // guarded by fs.mu
}

func (f *memFile) checkOpen(write bool) func(st *memState) error {
	return func(st *memState) error {
		if f.closed {
			return &fs.PathError{Op: "use", Path: f.name, Err: os.ErrClosed}
		}
		if write && !f.writable {
			return &fs.PathError{Op: "write", Path: f.name, Err: os.ErrPermission}
		}
		return nil
	}
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if _, err := f.fs.do(memOp{kind: opRead, path: f.name, ino: f.ino, off: off, size: int64(len(p))}, f.checkOpen(false)); err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	data := f.fs.st.inodes[f.ino].data
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	op, err := f.fs.do(memOp{kind: opWrite, path: f.name, ino: f.ino, off: off, data: slices.Clone(p)}, f.checkOpen(true))
	if err != nil {
		var short *errShort
		if asShort(err, &short) {
			return len(op.data), err
		}
		return 0, err
	}
	return len(p), nil
}

func (f *memFile) Sync() error {
	_, err := f.fs.do(memOp{kind: opSync, path: f.name, ino: f.ino}, f.checkOpen(false))
	return err
}

func (f *memFile) Truncate(size int64) error {
	_, err := f.fs.do(memOp{kind: opTruncate, path: f.name, ino: f.ino, size: size}, f.checkOpen(true))
	return err
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, &fs.PathError{Op: "stat", Path: f.name, Err: os.ErrClosed}
	}
	return int64(len(f.fs.st.inodes[f.ino].data)), nil
}

func (f *memFile) Close() error {
	_, err := f.fs.do(memOp{kind: opClose, path: f.name, ino: f.ino}, func(st *memState) error {
		if f.closed {
			return &fs.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
		}
		f.closed = true
		f.fs.open--
		return nil
	})
	return err
}
