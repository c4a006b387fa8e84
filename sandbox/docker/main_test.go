package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// testImage is built once per test binary by TestMain, under its own tag so a test run
// never replaces the image other users of this Docker host run.
const testImage = "nexo-sandbox:gotest"

var (
	engine     *client.Client // nil when no Docker engine answers
	noEngine   string         // why the Docker tests skip
	imageError error          // why the test image could not be built
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cli, err := NewClient(ctx)
	if err != nil {
		noEngine = fmt.Sprintf("no Docker engine answers (%v): the Docker tier's tests need one "+
			"(DOCKER_HOST or /var/run/docker.sock)", err)
	} else {
		engine = cli
		imageError = BuildImage(ctx, cli, testImage)
	}
	cancel()
	code := m.Run()
	if engine != nil {
		engine.Close()
	}
	os.Exit(code)
}

// needEngine skips the test without a Docker engine and fails it without the test image.
func needEngine(t testing.TB) *client.Client {
	t.Helper()
	if engine == nil {
		t.Skip(noEngine)
	}
	if imageError != nil {
		t.Fatalf("build the test image: %v", imageError)
	}
	return engine
}

// testRunID is a run id no other test (or test run) uses.
func testRunID(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return "gotest-" + name + "-" + hex.EncodeToString(b[:])
}

// newTestSandbox ensures a container for a fresh run with opts (the test image unless
// opts says otherwise) and removes it when the test ends.
func newTestSandbox(t testing.TB, opts Options) (*Sandbox, *Manager, string) {
	t.Helper()
	cli := needEngine(t)
	if opts.Image == "" {
		opts.Image = testImage
	}
	m := NewManager(cli, "gotest-worker")
	runID := testRunID(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Remove(ctx, runID); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := m.Ensure(ctx, runID, opts)
	if err != nil {
		t.Fatalf("Ensure(%s): %v", runID, err)
	}
	return sb, m, runID
}

// testCtx is a context for one test step.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// isLocalAddress reports whether ip is assigned to an interface of this machine.
func isLocalAddress(ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// localAddressIn returns an address of this machine inside the CIDR subnet, or "".
func localAddressIn(subnet string) string {
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		return ""
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && n.Contains(ipn.IP) {
			return ipn.IP.String()
		}
	}
	return ""
}
