package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
)

// BusyboxPaths are where BuildImage looks for a static busybox on the host: the Debian
// package busybox-static installs /bin/busybox.
var BusyboxPaths = []string{"/bin/busybox", "/usr/bin/busybox"}

// ErrNoBusybox: no static busybox on the host to build the default image from.
var ErrNoBusybox = errors.New("no static busybox on this host")

// imageUser is the non-root user of the default image.
const (
	imageUID  = 1000
	imageUser = "nexo"
)

// dockerfile builds the default image from the context BuildImage makes: nothing is
// pulled (FROM scratch) and nothing runs (there is no shell before the COPY).
const dockerfile = `FROM scratch
COPY rootfs/ /
COPY --chown=1000:1000 workspace/ /workspace/
ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/workspace
USER 1000:1000
WORKDIR /workspace
LABEL org.opencontainers.image.title="nexo sandbox (busybox)"
CMD ["/bin/sh"]
`

// BuildImage builds the default sandbox image as tag (DefaultImage when empty) with the
// Docker engine, from an in-memory context: the host's static busybox as /bin/busybox, a
// symbolic link per applet in /bin (sh, ls, find, setsid, timeout…), /usr/bin linked to
// /bin, an /etc/passwd with root and the non-root user nexo (uid 1000, home /workspace),
// /workspace owned by it and /tmp. No registry is needed. Building again replaces the tag.
func BuildImage(ctx context.Context, cli Client, tag string) error {
	if tag == "" {
		tag = DefaultImage
	}
	bin, err := findBusybox()
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	applets, err := busyboxApplets(ctx, bin)
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	buildCtx, err := imageContext(bin, applets)
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), client.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		NetworkMode: "none",
		Version:     build.BuilderV1, // the classic builder needs no BuildKit session
		Labels:      map[string]string{"nexo.sandbox.image": "busybox"},
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Body.Close()
	if err := buildErrors(resp.Body); err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	return nil
}

// findBusybox returns the first statically linked busybox of BusyboxPaths: a dynamic one
// cannot run FROM scratch.
func findBusybox() (string, error) {
	for _, p := range BusyboxPaths {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked for %s): install the Debian package busybox-static "+
		"(apt-get install busybox-static)", ErrNoBusybox, strings.Join(BusyboxPaths, ", "))
}

// busyboxApplets asks the binary which applets it has.
func busyboxApplets(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list applets of %s: %w", bin, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.ContainsAny(a, "/") {
			applets = append(applets, a)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("list applets of %s: none", bin)
	}
	sort.Strings(applets)
	return applets, nil
}

// imageContext is the build context: the Dockerfile, rootfs/ (copied to /) and
// workspace/ (copied with the user as owner).
func imageContext(bin string, applets []string) ([]byte, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", bin, err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\n%s:x:%d:%d:%s:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		imageUser, imageUID, imageUID, imageUser)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", imageUser, imageUID)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	add := func(h *tar.Header, body []byte) error {
		h.ModTime = now
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	dir := func(name string, mode int64) error {
		return add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}, nil)
	}
	file := func(name string, mode int64, body []byte) error {
		return add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, body)
	}
	link := func(name, target string) error {
		return add(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}, nil)
	}
	steps := []func() error{
		func() error { return file("Dockerfile", 0o644, []byte(dockerfile)) },
		func() error { return dir("rootfs", 0o755) },
		func() error { return dir("rootfs/bin", 0o755) },
		func() error { return file("rootfs/bin/busybox", 0o755, data) },
		func() error { return dir("rootfs/usr", 0o755) },
		func() error { return link("rootfs/usr/bin", "../bin") },
		func() error { return dir("rootfs/etc", 0o755) },
		func() error { return file("rootfs/etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("rootfs/etc/group", 0o644, []byte(group)) },
		func() error { return dir("rootfs/root", 0o700) },
		func() error { return dir("rootfs/tmp", 0o1777) },
		func() error { return dir("workspace", 0o755) },
	}
	for _, a := range applets {
		a := a
		steps = append(steps, func() error { return link("rootfs/bin/"+a, "busybox") })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("write build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write build context: %w", err)
	}
	return buf.Bytes(), nil
}

// buildErrors reads the build's JSON message stream to its end and returns the error it
// reports, if any (a failed build still answers 200).
func buildErrors(r io.Reader) error {
	dec := json.NewDecoder(r)
	var tail []string
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read build output: %w", err)
		}
		if s := strings.TrimSpace(msg.Stream); s != "" {
			tail = append(tail, s)
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
		if msg.Error != "" || msg.ErrorDetail != nil {
			text := msg.Error
			if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
				text = msg.ErrorDetail.Message
			}
			return fmt.Errorf("%s (after: %s)", text, strings.Join(tail, " | "))
		}
	}
}
