package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
)

// A server is a throwaway PostgreSQL server, as make test starts one.
type server struct {
	bin, user string // PostgreSQL's programs; the user that runs them, if not this one
	dir       string // holds the data directory, the socket and the log
	addr, url string
}

// startServer initializes a cluster in a temporary directory and starts
// it on 127.0.0.1 and a free port, fsync on. As root, the server runs as
// the postgres user, which PostgreSQL's package creates.
func startServer() (*server, error) {
	bin := findBin()
	if bin == "" {
		return nil, fmt.Errorf("no PostgreSQL found (initdb): install it (apt-get install postgresql), or pass -url")
	}
	s := &server{bin: bin}
	if os.Geteuid() == 0 {
		s.user = "postgres"
		if _, err := user.Lookup(s.user); err != nil {
			s.user = "nobody"
		}
	}
	dir, err := os.MkdirTemp("", "worklease-multiprocess")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	if s.user != "" {
		if out, err := exec.Command("chown", s.user, dir).CombinedOutput(); err != nil {
			s.remove()
			return nil, fmt.Errorf("chown: %v: %s", err, out)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.command("initdb", "-D", data, "-U", "worklease", "-A", "trust", "-E", "UTF8", "--no-locale").CombinedOutput(); err != nil {
		s.remove()
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.remove()
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := s.command("pg_ctl", "-D", data, "-w", "-t", "60", "-l", filepath.Join(dir, "server.log"), "start",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=on", port, dir)).CombinedOutput(); err != nil {
		s.remove()
		return nil, fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.url = "postgres://worklease@" + s.addr + "/postgres?sslmode=disable"
	return s, nil
}

// stop stops the server and removes its directory.
func (s *server) stop() {
	_ = s.command("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-w", "-m", "fast", "stop").Run()
	s.remove()
}

func (s *server) remove() { _ = os.RemoveAll(s.dir) }

// command returns the command that runs PostgreSQL's program name as the
// server's user.
func (s *server) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.user == "" {
		return exec.Command(path, args...)
	}
	return exec.Command("runuser", append([]string{"-u", s.user, "--", path}, args...)...)
}

// findBin returns the directory of PostgreSQL's programs: the newest of
// Debian's, or initdb's on the PATH; "" if there is none.
func findBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int { // /usr/lib/postgresql/15/bin: 15
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}
