package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad flags are refused with an error naming the flag; TLS files turn on verified TLS to the
// frontend.
func TestParse(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "8080"}, "--address"},
		{[]string{"--address", "127.0.0.1:7233"}, "--port 0"},
		{[]string{"--address", "127.0.0.1:7233", "--port", "8080", "--ip", "localhost"}, "--ip"},
		{[]string{"--address", "127.0.0.1:7233", "--port", "8080", "--tls-cert", ca}, "--tls-cert and --tls-key"},
		{[]string{"--address", "127.0.0.1:7233", "--port", "8080", "--tls-ca", ca + ".missing"}, "--tls-ca"},
		{[]string{"--address", "127.0.0.1:7233", "--port", "8080", "--tls-server-name", "x"}, "TLS is off"},
	} {
		if _, err := parse(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse(%q) = %v, want an error naming %q", c.args, err, c.want)
		}
	}
	f, err := parse([]string{"--address", "127.0.0.1:7233", "--port", "8080", "--namespace", "nexo", "--tls-ca", ca, "--tls-server-name", "t.test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	if cfg.TemporalGRPCAddress != "127.0.0.1:7233" || cfg.Port != 8080 || cfg.DefaultNamespace != "nexo" {
		t.Errorf("config = %+v", cfg)
	}
	if cfg.TLS.CaFile != ca || cfg.TLS.ServerName != "t.test" || !cfg.TLS.EnableHostVerification {
		t.Errorf("TLS = %+v, want the CA, the server name and host verification", cfg.TLS)
	}
	f, _ = parse([]string{"--address", "127.0.0.1:7233", "--port", "8080"})
	if cfg := f.config(); cfg.TLS.CaFile != "" || cfg.TLS.CertFile != "" || cfg.TLS.ServerName != "" {
		t.Errorf("TLS without TLS flags: %+v", cfg.TLS)
	}
}
