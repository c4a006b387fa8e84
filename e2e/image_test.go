package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/devserver"
)

// imageTestLabel marks what TestDockerfileFinalStage creates, so it removes only its own.
const imageTestLabel = "nexo.test=deploy-image"

// TestDockerfileFinalStage builds the final stage of the repository's Dockerfile here:
// the first stage's golang image cannot be pulled on these machines, so the test compiles
// the same two binaries the same way (CGO_ENABLED=0, -trimpath), lays them out as the
// first stage's /out, and builds the Dockerfile's own `FROM scratch` stage from them with
// the local engine. Then the image's worker starts against a dev server and says ready,
// and its starter (the gateway's binary) lists runs: a binary that is not static, or a
// stage that lacks what they need, fails here.
func TestDockerfileFinalStage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiling the binaries with CGO_ENABLED=0 rebuilds every package once")
	}
	if exec.Command("docker", "info").Run() != nil {
		t.Skip("no Docker engine answered `docker info`; the image cannot be built here")
	}
	stage := finalStage(t)

	ctxDir := t.TempDir()
	out := filepath.Join(ctxDir, "out")
	for _, pkg := range []string{"worker", "starter"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(out, pkg), "./"+pkg)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("CGO_ENABLED=0 go build ./%s: %v\n%s", pkg, err, b)
		}
	}
	if err := os.MkdirAll(filepath.Join(out, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Skipf("no CA bundle on this machine to stand in for the build stage's: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(ctxDir, "etc/ssl/certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "etc/ssl/certs/ca-certificates.crt"), certs, 0o644); err != nil {
		t.Fatal(err)
	}
	// `COPY --from=build /out/worker …` becomes `COPY out/worker …`: the same files, from
	// the context instead of the first stage.
	df := strings.ReplaceAll(stage, "COPY --from=build ", "COPY ")
	df = strings.ReplaceAll(df, " /out/", " out/")
	df = strings.ReplaceAll(df, "COPY /etc/", "COPY etc/")
	df += "\nLABEL " + imageTestLabel + "\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("nexo-deploy-test:%d", os.Getpid())
	if b, err := exec.Command("docker", "build", "-q", "-t", tag, ctxDir).CombinedOutput(); err != nil {
		t.Fatalf("docker build of the Dockerfile's final stage:\n%s\n%v\n%s", df, err, b)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })

	srv := startDevServer(t, devserver.Options{})
	t.Cleanup(func() { _ = srv.Stop() })
	env := []string{"-e", "NEXO_TEMPORAL_ADDRESS=" + srv.FrontendAddress(), "-e", "NEXO_LOG_LEVEL=warn"}

	// The worker is the image's entrypoint; host networking reaches the dev server on 127.0.0.1.
	name := fmt.Sprintf("nexo-deploy-worker-%d", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, "docker", append(append([]string{"run", "--rm", "--name", name, "--label", imageTestLabel, "--network", "host"}, env...), tag)...)
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("docker", "rm", "-f", name).Run()
		_ = run.Wait()
	})
	ready := false
	var seen []string
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		seen = append(seen, sc.Text())
		if strings.HasPrefix(sc.Text(), "Nexo worker ready") {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatalf("the image's worker never said ready:\n%s\n%s", strings.Join(seen, "\n"), stderr.String())
	}

	// The starter of the same image (the gateway service's binary) reaches the server and
	// finds the worker's announcement.
	b, err := exec.CommandContext(ctx, "docker", append(append([]string{"run", "--rm", "--label", imageTestLabel, "--network", "host", "--entrypoint", "/usr/local/bin/starter"}, env...), tag, "workflows")...).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "DocumentApproval") {
		t.Fatalf("starter workflows in the image: %v\n%s", err, b)
	}
}

// finalStage is the Dockerfile's last stage, from its `FROM scratch` line on.
func finalStage(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(string(data), "\nFROM scratch")
	if i < 0 {
		t.Fatal("the Dockerfile's last stage is not FROM scratch")
	}
	return string(data[i+1:])
}
