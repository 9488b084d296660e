package pg_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/pg"
)

// countedPool returns a pool on url, with edit's changes to its
// connections' settings if edit is not nil, closed when t ends, and the
// number of connections it has tried to make so far.
func countedPool(t *testing.T, url string, edit func(*pgx.ConnConfig)) (*pgxpool.Pool, *atomic.Int32) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg.ConnConfig)
	}
	var tries atomic.Int32
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
		tries.Add(1)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, &tries
}

// openAsync calls Open on pool with ctx in a goroutine, and returns where
// its Manager and error come.
func openAsync(ctx context.Context, pool *pgxpool.Pool) <-chan opened {
	done := make(chan opened, 1)
	go func() {
		m, err := pg.OpenSchema(ctx, pool, newSchemaName())
		done <- opened{m, err}
	}()
	return done
}

type opened struct {
	m   *pg.Manager
	err error
}

// Open waits for a server that is not there yet: called before the server
// starts, it finds nothing listening, tries again, and opens once the
// server has started.
func TestOpenWaitsForAServerThatStarts(t *testing.T) {
	s := newPrivateServer(t)
	s.initdb(t)
	pool, tries := countedPool(t, s.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := openAsync(ctx, pool)
	for tries.Load() < 2 { // refused, and tried again
		select {
		case o := <-done:
			t.Fatalf("Open returned before the server started: %v", o.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := s.pgCtl("start"); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("Open of a server started after it was called: %v", o.err)
	}
	defer o.m.Close()
	if st, err := o.m.Enqueue(ctx, "d", 1, nil); err != nil || st != worklease.Enqueued {
		t.Fatalf("Enqueue after Open: %v, %v", st, err)
	}
}

// Open waits for a server that is starting up: one that answers "the
// database system is starting up" (SQLSTATE 57P03), as PostgreSQL does
// until it has recovered, for its first connections.
func TestOpenWaitsWhileTheServerStartsUp(t *testing.T) {
	url := testPool(t).Config().ConnString()
	base, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	const refused = 3
	proxy := startingProxy(t, net.JoinHostPort(base.Host, strconv.Itoa(int(base.Port))), refused)
	pool, tries := countedPool(t, url, at("127.0.0.1", proxy.port))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := <-openAsync(ctx, pool)
	if o.err != nil {
		t.Fatalf("Open of a server starting up: %v", o.err)
	}
	defer o.m.Close()
	if n := proxy.refused.Load(); n != refused || tries.Load() <= refused {
		t.Fatalf("Open connected after %d tries, %d of them refused; want %d refused, then one that connects", tries.Load(), n, refused)
	}
}

// Open returns the error of connecting at once when it is not a server
// starting (here, a role that does not exist), and when its context ends
// while nothing listens; either way its error says "pg: open:".
func TestOpenErrors(t *testing.T) {
	url := testPool(t).Config().ConnString()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pool, _ := countedPool(t, url, func(cc *pgx.ConnConfig) { cc.User = "no_such_role" })
	_, err := pg.Open(ctx, pool)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28000" || errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "pg: open: ") {
		t.Errorf("Open as a role that does not exist: %v; want the server's 28000 at once, as pg: open:", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	pool, tries := countedPool(t, url, at("127.0.0.1", uint16(port)))
	// Long enough for a second try, whose pause is 50ms, on a loaded machine.
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	_, err = pg.Open(short, pool)
	var connectErr *pgconn.ConnectError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &connectErr) || !strings.HasPrefix(err.Error(), "pg: open: ") {
		t.Errorf("Open of a server that never starts: %v; want its context's end and the error of connecting, as pg: open:", err)
	}
	if tries.Load() < 2 {
		t.Errorf("Open tried to connect %d times before its context ended", tries.Load())
	}
}

// at returns an edit of connection settings to connect to host and port.
func at(host string, port uint16) func(*pgx.ConnConfig) {
	return func(cc *pgx.ConnConfig) {
		cc.Host, cc.Port, cc.Fallbacks = host, port, nil
	}
}

// A proxy answers its first connections as a server starting up does, and
// passes the others on to a server.
type proxy struct {
	port    uint16
	refused atomic.Int32
}

// startingProxy starts a proxy to the server at addr whose first refuse
// connections are refused with SQLSTATE 57P03, and stops it when t ends.
func startingProxy(t *testing.T, addr string, refuse int32) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{port: uint16(l.Addr().(*net.TCPAddr).Port)}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			track(c)
			if p.refused.Load() < refuse {
				p.refused.Add(1)
				wg.Go(func() { refuseStartingUp(c) })
				continue
			}
			wg.Go(func() {
				server, err := net.Dial("tcp", addr)
				if err != nil {
					c.Close()
					return
				}
				track(server)
				var both sync.WaitGroup
				both.Go(func() { _, _ = io.Copy(server, c); server.Close() })
				both.Go(func() { _, _ = io.Copy(c, server); c.Close() })
				both.Wait()
			})
		}
	})
	return p
}

// refuseStartingUp reads the startup message on c, answers as a server
// starting up does, and closes c.
func refuseStartingUp(c net.Conn) {
	defer c.Close()
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return
	}
	if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(n[:]))-4); err != nil {
		return
	}
	msg, err := (&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
		Message: "the database system is starting up"}).Encode(nil)
	if err == nil {
		_, _ = c.Write(msg)
	}
}
