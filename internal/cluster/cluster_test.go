package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
