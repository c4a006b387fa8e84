package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres means the PostgreSQL server binaries (initdb, postgres) are not installed.
var ErrNoPostgres = errors.New("PostgreSQL is not installed (initdb and postgres not found in PATH or /usr/lib/postgresql/*/bin; apt-get install postgresql)")

// postgresBin finds a PostgreSQL server binary: PATH first, then Debian's versioned dirs.
func postgresBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNoPostgres
}

// HavePostgres reports whether the PostgreSQL server binaries are installed.
func HavePostgres() bool {
	_, err1 := postgresBin("initdb")
	_, err2 := postgresBin("postgres")
	return err1 == nil && err2 == nil
}

// postgres is one PostgreSQL server on a loopback port with its data in dir. PostgreSQL
// refuses to run as root; as root it runs as the system user "postgres".
type postgres struct {
	dir, data string
	port      int
	asUser    *user.User // nil: the current user
	proc      *process
	logs      string
}

func newPostgres(ctx context.Context, logs string) (*postgres, error) {
	initdb, err := postgresBin("initdb")
	if err != nil {
		return nil, err
	}
	if _, err := postgresBin("postgres"); err != nil {
		return nil, err
	}
	// A directory of its own under the system temp dir: the postgres user must be able to
	// reach it, which a test's 0700 temp dir does not allow.
	dir, err := os.MkdirTemp("", "nexo-cluster-pg-")
	if err != nil {
		return nil, err
	}
	pg := &postgres{dir: dir, data: filepath.Join(dir, "data"), logs: logs}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL needs the system user postgres (apt-get install postgresql creates it): %w", err)
		}
		pg.asUser = u
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if pg.port, err = FreePort(); err != nil {
		return nil, err
	}
	cmd := pg.command(ctx, initdb, "-D", pg.data, "--auth=trust", "-U", "postgres", "--encoding=UTF8", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return pg, nil
}

// command runs bin as the PostgreSQL user.
func (pg *postgres) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = pg.dir
	if pg.asUser != nil {
		uid, _ := strconv.Atoi(pg.asUser.Uid)
		gid, _ := strconv.Atoi(pg.asUser.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(os.Environ(), "HOME="+pg.dir)
	}
	return cmd
}

// start runs the server and waits until a login and a query succeed (see waitLogin).
func (pg *postgres) start(ctx context.Context) error {
	bin, _ := postgresBin("postgres")
	cmd := pg.command(context.Background(), bin, "-D", pg.data, "-p", strconv.Itoa(pg.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+pg.dir,
		"-c", "fsync=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB")
	p, err := startProcess("postgres", cmd, filepath.Join(pg.logs, "postgres.log"), "")
	if err != nil {
		return err
	}
	pg.proc = p
	return waitLogin(ctx, pg.dsn(), p, pgReadyTimeout)
}

// pgReadyTimeout bounds how long start waits for the first login: recovery after a crash
// replays the write-ahead log first, which takes seconds on a loaded machine.
const pgReadyTimeout = 2 * time.Minute

// dsn is the connection string of the postgres superuser (trust auth on loopback).
func (pg *postgres) dsn() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&connect_timeout=5", pg.addr())
}

func (pg *postgres) addr() string { return "127.0.0.1:" + strconv.Itoa(pg.port) }

// kill stops the server the way a crash does (SIGQUIT: immediate shutdown, no checkpoint;
// the next start recovers from the write-ahead log).
func (pg *postgres) kill() {
	if pg.proc != nil {
		pg.proc.signal(syscall.SIGQUIT)
		pg.proc.wait(30 * time.Second)
		pg.proc = nil
	}
}

// stop shuts down cleanly (SIGINT: fast shutdown) and removes the data.
func (pg *postgres) stop() {
	if pg.proc != nil {
		pg.proc.signal(syscall.SIGINT)
		pg.proc.wait(30 * time.Second)
		pg.proc = nil
	}
	_ = os.RemoveAll(pg.dir)
}

// waitLogin waits until a client can log in to dsn and run SELECT 1, failing early if p
// exits and after timeout at the latest. An open port is not enough: while it starts up or
// recovers, PostgreSQL accepts connections and refuses every login with 57P03 ("the
// database system is starting up"), which is what temporal-sql-tool met under load.
func waitLogin(ctx context.Context, dsn string, p *process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		err := pingSQL(ctx, dsn)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil || last == nil { // keep the server's answer, not our deadline
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no login and SELECT 1 succeeded within %s (last error: %v)\n%s", p.name, timeout, last, p.tail())
		case <-p.done:
			return fmt.Errorf("%s exited before a login succeeded (last error: %v):\n%s", p.name, last, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pingSQL logs in to dsn and runs SELECT 1 on a fresh connection.
func pingSQL(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("SELECT 1: %w", err)
	}
	return nil
}

// waitTCP waits until addr accepts a TCP connection, failing early if p exits.
func waitTCP(ctx context.Context, addr string, p *process) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not listening on %s: %w\n%s", p.name, addr, ctx.Err(), p.tail())
		case <-p.done:
			return fmt.Errorf("%s exited before it listened on %s:\n%s", p.name, addr, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
