package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func requirePostgres(t *testing.T) {
	t.Helper()
	if HavePostgres() {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(ErrNoPostgres)
	}
	t.Skip(ErrNoPostgres)
}

// PostgreSQL starts as the postgres user when run as root, answers queries, survives a crash
// with its data, and is removed by stop.
func TestPostgresCrashKeepsData(t *testing.T) {
	requirePostgres(t)
	psql, err := postgresBin("psql")
	if err != nil {
		t.Skip("no psql")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := newPostgres(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	if err := pg.start(ctx); err != nil {
		t.Fatal(err)
	}
	// start returns only once a login works: the first query needs no retry.
	if err := pingSQL(ctx, pg.dsn()); err != nil {
		t.Fatalf("first login after start: %v", err)
	}
	q := func(sql string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, psql, "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres",
			"-tAc", sql).CombinedOutput()
		if err != nil {
			t.Fatalf("psql %q: %v\n%s", sql, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	q("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	pg.kill()
	if c, err := net.DialTimeout("tcp", pg.addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("PostgreSQL still listening after the crash")
	}
	if err := pg.start(ctx); err != nil {
		t.Fatal(err)
	}
	// Recovery from the write-ahead log refuses logins (57P03) with the port open; start
	// waited it out, so the first login after the crash works.
	if err := pingSQL(ctx, pg.dsn()); err != nil {
		t.Fatalf("first login after the crash: %v", err)
	}
	if got := q("SELECT v FROM kept"); got != "42" {
		t.Errorf("after the crash: %q, want 42", got)
	}
	dir := pg.dir
	pg.stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data directory %s left after stop", dir)
	}
}

// The generated CA signs a server certificate for the server name and 127.0.0.1 and a client
// certificate a server requiring client auth accepts.
func TestGeneratedTLSVerifies(t *testing.T) {
	f, err := generateTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pemCA, _ := os.ReadFile(f.CA)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		t.Fatal("CA not PEM")
	}
	srv, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srv}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_, _ = c.Write([]byte("ok"))
			c.Close()
		}
	}()
	dial := func(certs []tls.Certificate) error {
		c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, ServerName: f.ServerName, Certificates: certs})
		if err != nil {
			return err
		}
		defer c.Close()
		b := make([]byte, 2)
		_, err = c.Read(b)
		return err
	}
	if err := dial([]tls.Certificate{cli}); err != nil {
		t.Errorf("client with the certificate: %v", err)
	}
	if err := dial(nil); err == nil {
		t.Error("client without a certificate was accepted")
	}
}

// startupRefuser accepts connections and answers every startup message the way PostgreSQL
// does while it starts up or recovers: an open port whose logins fail with 57P03.
func startupRefuser(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	msg := "SFATAL\x00C57P03\x00Mthe database system is starting up\x00\x00"
	resp := append([]byte{'E', 0, 0, 0, byte(4 + len(msg))}, msg...)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Read(buf) // the startup message (or an SSL request)
				_, _ = c.Write(resp)
			}()
		}
	}()
	return l.Addr().String()
}

// An open port that refuses logins is not ready: waitLogin keeps trying until its deadline
// and then says that no login succeeded, with the server's last answer.
func TestWaitLoginIsNotFooledByAnOpenPort(t *testing.T) {
	addr := startupRefuser(t)
	p, err := startProcess("postgres", exec.Command("sleep", "60"), filepath.Join(t.TempDir(), "log"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.signal(syscall.SIGKILL); <-p.done }()
	err = waitLogin(context.Background(), "postgres://postgres@"+addr+"/postgres?sslmode=disable", p, time.Second)
	if err == nil {
		t.Fatal("waitLogin succeeded against a server that refuses every login")
	}
	for _, want := range []string{"no login and SELECT 1 succeeded within 1s", "57P03"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("waitLogin error = %q, want it to contain %q", err, want)
		}
	}
}
