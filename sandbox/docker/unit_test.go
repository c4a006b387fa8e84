package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"

	"github.com/nexo-temporal/nexo/sandbox"
)

func TestOptionsDefaults(t *testing.T) {
	s, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	hc := s.hostConfig(nil)
	checks := []struct {
		name      string
		got, want any
	}{
		{"image", s.image, DefaultImage},
		{"workdir", s.workdir, "/workspace"},
		{"network", string(hc.NetworkMode), "none"},
		{"cap drop", []string(hc.CapDrop), []string{"ALL"}},
		{"cap add", len(hc.CapAdd), 0},
		{"security opt", hc.SecurityOpt, []string{"no-new-privileges"}},
		{"read-only root", hc.ReadonlyRootfs, true},
		{"memory", hc.Memory, int64(1 << 30)},
		{"swap", hc.MemorySwap, int64(1 << 30)},
		{"cpus", hc.NanoCPUs, int64(1e9)},
		{"pids", *hc.PidsLimit, int64(512)},
		{"init", *hc.Init, true},
		{"workspace volume", hc.Mounts[0].Target, "/workspace"},
		{"tmp", hc.Tmpfs["/tmp"] != "", true},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	no := false
	tests := []struct {
		name    string
		opts    Options
		wantErr string // a field name, or "" for valid
	}{
		{"custom", Options{Image: "alpine:3", Workdir: "/src/", Network: "bridge", Memory: "512m",
			CPUs: 0.5, PidsLimit: -1, User: "1000:1000", Env: map[string]string{"A": "b"},
			ROBinds: []string{"/opt/ref:/ref"}, RWBinds: []string{"/srv/out:/out"},
			ReadonlyRootfs: &no, CapAdd: []string{"NET_BIND_SERVICE"}}, ""},
		{"relative workdir", Options{Workdir: "work"}, "workdir"},
		{"root workdir", Options{Workdir: "/"}, "workdir"},
		{"workdir in /proc", Options{Workdir: "/proc/x"}, "workdir"},
		{"host network", Options{Network: "host"}, "network"},
		{"container network", Options{Network: "container:abc"}, "network"},
		{"bad memory", Options{Memory: "lots"}, "memory"},
		{"tiny memory", Options{Memory: "1k"}, "memory"},
		{"negative cpus", Options{CPUs: -1}, "cpus"},
		{"negative pids", Options{PidsLimit: -5}, "pids_limit"},
		{"env name with =", Options{Env: map[string]string{"A=B": "c"}}, "env"},
		{"bind without colon", Options{ROBinds: []string{"/a"}}, "ro_binds"},
		{"relative bind", Options{RWBinds: []string{"a:/b"}}, "rw_binds"},
		{"bind over root", Options{RWBinds: []string{"/a:/"}}, "rw_binds"},
		{"cap ALL", Options{CapAdd: []string{"all"}}, "cap_add"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.opts.withDefaults()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("withDefaults: %v", err)
				}
				hc := s.hostConfig(nil)
				if s.workdir != "/src" || hc.ReadonlyRootfs || hc.Tmpfs != nil || *hc.PidsLimit != -1 ||
					len(hc.Binds) != 0 || len(hc.Mounts) != 3 ||
					hc.Mounts[1] != (mount.Mount{Type: mount.TypeBind, Source: "/opt/ref", Target: "/ref", ReadOnly: true}) ||
					hc.Mounts[2] != (mount.Mount{Type: mount.TypeBind, Source: "/srv/out", Target: "/out"}) ||
					hc.Memory != 512<<20 || hc.NanoCPUs != 5e8 {
					t.Errorf("settings = %+v, host config = %+v", s, hc)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("withDefaults = %v, want an ErrInvalidOptions naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestContainerName(t *testing.T) {
	if got := ContainerName("0193b0c2-7d4e-7abc-8def-0123456789ab"); got != "nexo-run-0193b0c2-7d4e-7abc-8def-0123456789ab" {
		t.Errorf("uuid name = %q", got)
	}
	a, b := ContainerName("order/42 (retry)"), ContainerName("order/42 (retry!)")
	if !safeName.MatchString(a) || a == b {
		t.Errorf("names %q and %q: want valid and distinct", a, b)
	}
}

// ensureFake is a fake engine with no containers, an image, and a recorder of calls.
func ensureFake(calls *[]string) *fakeClient {
	return &fakeClient{
		list: func(client.ContainerListOptions) ([]container.Summary, error) { return nil, nil },
		inspect: func(id string) (container.InspectResponse, error) {
			return container.InspectResponse{}, fmt.Errorf("No such container: %s: %w", id, cerrdefs.ErrNotFound)
		},
		imgInspect: func(ref string) (image.InspectResponse, error) {
			*calls = append(*calls, "image "+ref)
			return image.InspectResponse{Config: &dockerspec.DockerOCIImageConfig{}}, nil
		},
		create: func(cfg *container.Config, hc *container.HostConfig, name string) (container.CreateResponse, error) {
			*calls = append(*calls, "create "+name)
			return container.CreateResponse{ID: "new"}, nil
		},
		start: func(id string) error {
			*calls = append(*calls, "start "+id)
			return nil
		},
		remove: func(id string, o client.ContainerRemoveOptions) error {
			*calls = append(*calls, fmt.Sprintf("remove %s force=%v volumes=%v", id, o.Force, o.RemoveVolumes))
			return nil
		},
		statPath: func(id, p string) (container.PathStat, error) {
			return container.PathStat{Name: "workspace", Mode: os.ModeDir | 0o755}, nil
		},
	}
}

func TestEnsureCreates(t *testing.T) {
	var calls []string
	f := ensureFake(&calls)
	var labels map[string]string
	create := f.create
	f.create = func(cfg *container.Config, hc *container.HostConfig, name string) (container.CreateResponse, error) {
		labels = cfg.Labels
		if cfg.User != "" {
			t.Errorf("user = %q, want the image's (none)", cfg.User)
		}
		return create(cfg, hc, name)
	}
	sb, err := NewManager(f, "w1").Ensure(context.Background(), "run-1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"image " + DefaultImage, "create nexo-run-run-1", "start new"}
	if !slices.Equal(calls, want) || sb.ID() != "new" {
		t.Errorf("calls = %q, id %s; want %q, new", calls, sb.ID(), want)
	}
	if labels[LabelManaged] != "true" || labels[LabelRun] != "run-1" || labels[LabelWorker] != "w1" {
		t.Errorf("labels = %v", labels)
	}
}

func TestEnsureNameConflictReusesTheWinner(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		state   container.ContainerState
		wantErr bool
		want    []string
	}{
		{"running winner", map[string]string{LabelManaged: "true", LabelRun: "run-1"}, "running", false,
			[]string{"image " + DefaultImage, "create nexo-run-run-1"}},
		{"created winner is started", map[string]string{LabelManaged: "true", LabelRun: "run-1"}, "created", false,
			[]string{"image " + DefaultImage, "create nexo-run-run-1", "start winner"}},
		{"foreign container", map[string]string{"other": "x"}, "running", true,
			[]string{"image " + DefaultImage, "create nexo-run-run-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			f := ensureFake(&calls)
			f.create = func(*container.Config, *container.HostConfig, string) (container.CreateResponse, error) {
				calls = append(calls, "create nexo-run-run-1")
				return container.CreateResponse{}, fmt.Errorf("name in use: %w", cerrdefs.ErrConflict)
			}
			f.inspect = func(id string) (container.InspectResponse, error) {
				r := container.InspectResponse{ID: "winner", State: &container.State{Status: tt.state},
					Config: &container.Config{Labels: tt.labels}}
				return r, nil
			}
			sb, err := NewManager(f, "w1").Ensure(context.Background(), "run-1", Options{})
			if tt.wantErr != (err != nil) {
				t.Fatalf("Ensure error = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && sb.ID() != "winner" {
				t.Errorf("id = %s, want winner", sb.ID())
			}
			if !slices.Equal(calls, tt.want) {
				t.Errorf("calls = %q, want %q", calls, tt.want)
			}
		})
	}
}

func TestEnsureStartsAStoppedContainer(t *testing.T) {
	var calls []string
	f := ensureFake(&calls)
	f.list = func(o client.ContainerListOptions) ([]container.Summary, error) {
		if !o.All || !o.Filters["label"][LabelRun+"=run-1"] {
			t.Errorf("list options = %+v", o)
		}
		return []container.Summary{{ID: "old", State: "exited",
			Labels: map[string]string{LabelWorkdir: "/src", LabelUser: "1000:1000"}}}, nil
	}
	sb, err := NewManager(f, "w1").Ensure(context.Background(), "run-1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []string{"start old"}) || sb.Workdir() != "/src" || sb.set.user != "1000:1000" {
		t.Errorf("calls = %q, workdir %s, user %q", calls, sb.Workdir(), sb.set.user)
	}
}

func TestEnsureMissingImage(t *testing.T) {
	for _, img := range []string{"", "python:3.12"} {
		var calls []string
		f := ensureFake(&calls)
		f.imgInspect = func(ref string) (image.InspectResponse, error) {
			return image.InspectResponse{}, fmt.Errorf("No such image: %s: %w", ref, cerrdefs.ErrNotFound)
		}
		_, err := NewManager(f, "w1").Ensure(context.Background(), "run-1", Options{Image: img})
		var inf *ImageNotFoundError
		if !errors.Is(err, ErrImageNotFound) || !errors.As(err, &inf) {
			t.Fatalf("Ensure(image %q) = %v, want ErrImageNotFound", img, err)
		}
		want := img
		if want == "" {
			want = DefaultImage
		}
		if inf.Image != want || !strings.Contains(err.Error(), "starter sandbox build-image") || !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want it to name %s and starter sandbox build-image", err, want)
		}
		if len(calls) != 0 {
			t.Errorf("calls = %q, want none", calls)
		}
	}
}

func TestEnsureRemovesAContainerThatFailsToStart(t *testing.T) {
	var calls []string
	f := ensureFake(&calls)
	f.start = func(id string) error {
		calls = append(calls, "start "+id)
		return errors.New("network nope not found")
	}
	_, err := NewManager(f, "w1").Ensure(context.Background(), "run-1", Options{Network: "nope"})
	if err == nil || !strings.Contains(err.Error(), "network nope not found") {
		t.Fatalf("Ensure = %v, want the start error", err)
	}
	if last := calls[len(calls)-1]; last != "remove new force=true volumes=true" {
		t.Errorf("calls = %q, want the container removed", calls)
	}
}

func TestReapDecidesByRun(t *testing.T) {
	containers := []container.Summary{
		{ID: "c-open", Names: []string{"/nexo-run-open"}, Labels: map[string]string{LabelManaged: "true", LabelRun: "open"}},
		{ID: "c-closed", Names: []string{"/nexo-run-closed"}, Labels: map[string]string{LabelManaged: "true", LabelRun: "closed"}},
		{ID: "c-closed2", Names: []string{"/by-hand"}, Labels: map[string]string{LabelManaged: "true", LabelRun: "closed"}},
		{ID: "c-nolabel", Names: []string{"/nexo-orphan"}, Labels: map[string]string{LabelManaged: "true"}},
		{ID: "c-err", Names: []string{"/nexo-run-err"}, Labels: map[string]string{LabelManaged: "true", LabelRun: "err"}},
	}
	var removed []string
	asked := map[string]int{}
	f := &fakeClient{
		list: func(o client.ContainerListOptions) ([]container.Summary, error) {
			if !reflect.DeepEqual(o.Filters, make(client.Filters).Add("label", LabelManaged+"=true")) {
				t.Errorf("list filters = %v", o.Filters)
			}
			return containers, nil
		},
		remove: func(id string, o client.ContainerRemoveOptions) error {
			if !o.Force || !o.RemoveVolumes {
				t.Errorf("remove %s with %+v, want force and volumes", id, o)
			}
			removed = append(removed, id)
			return nil
		},
		volList: func(client.VolumeListOptions) ([]volume.Volume, error) {
			return []volume.Volume{{Name: "dangling"}}, nil
		},
		volRemove: func(name string, force bool) error {
			removed = append(removed, "volume "+name)
			return nil
		},
	}
	got, err := Reap(context.Background(), f, func(run string) (bool, error) {
		asked[run]++
		switch run {
		case "open":
			return false, nil
		case "err":
			return false, errors.New("temporal unavailable")
		}
		return true, nil
	})
	if err == nil || !strings.Contains(err.Error(), "temporal unavailable") {
		t.Errorf("Reap error = %v, want the isClosed failure", err)
	}
	if want := []string{"nexo-run-closed", "by-hand", "nexo-orphan"}; !slices.Equal(got, want) {
		t.Errorf("Reap removed %q, want %q", got, want)
	}
	if want := []string{"c-closed", "c-closed2", "c-nolabel", "volume dangling"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if asked["closed"] != 1 {
		t.Errorf("isClosed(closed) asked %d times, want once", asked["closed"])
	}
}

// statTree fakes ContainerStatPath over a map of paths; a link's LinkTarget is what the
// daemon reports: the target fully resolved.
func statTree(tree map[string]container.PathStat) func(id, p string) (container.PathStat, error) {
	return func(_, p string) (container.PathStat, error) {
		if st, ok := tree[p]; ok {
			return st, nil
		}
		return container.PathStat{}, fmt.Errorf("Could not find the file %s in container x: %w", p, cerrdefs.ErrNotFound)
	}
}

func TestWalkGuardsLinks(t *testing.T) {
	dir := container.PathStat{Mode: os.ModeDir | 0o755}
	file := container.PathStat{Mode: 0o644, Size: 3}
	link := func(to string) container.PathStat {
		return container.PathStat{Mode: os.ModeSymlink | 0o777, LinkTarget: to}
	}
	tree := map[string]container.PathStat{
		"/workspace":          dir,
		"/workspace/d":        dir,
		"/workspace/d/f":      file,
		"/workspace/in":       link("/workspace/d"),
		"/workspace/fl":       link("/workspace/d/f"),
		"/workspace/out":      link("/etc"),
		"/workspace/pw":       link("/etc/passwd"),
		"/workspace/dang":     link("/workspace/new/deep"),
		"/workspace/dangout":  link("/tmp/x"),
		"/workspace/prefix":   link("/workspace-other"),
		"/workspace/d/parent": link("/workspace"),
	}
	sb := &Sandbox{cli: &fakeClient{statPath: statTree(tree)}, id: "x", set: settings{workdir: "/workspace"}}
	tests := []struct {
		path       string
		wantPhys   string
		wantParent string
		wantTail   []string
		wantErr    error
	}{
		{"d/f", "/workspace/d/f", "/workspace/d", []string{"f"}, nil},
		{"/workspace/d/f", "/workspace/d/f", "/workspace/d", []string{"f"}, nil},
		{"in/f", "/workspace/d/f", "/workspace/d", []string{"f"}, nil},
		{"fl", "/workspace/d/f", "/workspace/d", []string{"f"}, nil},
		{"in/new/x", "/workspace/d/new/x", "/workspace/d", []string{"new", "x"}, nil},
		{"dang", "/workspace/new/deep", "/workspace", []string{"new", "deep"}, nil},
		{"d/parent/d/f", "/workspace/d/f", "/workspace/d", []string{"f"}, nil},
		{"out/passwd", "", "", nil, sandbox.ErrEscape},
		{"pw", "", "", nil, sandbox.ErrEscape},
		{"dangout", "", "", nil, sandbox.ErrEscape},
		{"prefix/x", "", "", nil, sandbox.ErrEscape},
		{"../etc/passwd", "", "", nil, sandbox.ErrEscape},
		{"/etc/passwd", "", "", nil, sandbox.ErrEscape},
		{"/workspace-other/x", "", "", nil, sandbox.ErrEscape},
		{"a\x00b", "", "", nil, sandbox.ErrEscape},
		{"d/f/x", "", "", nil, sandbox.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := sb.resolve(context.Background(), "read", tt.path)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("resolve = %+v, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.phys != tt.wantPhys || got.parent != tt.wantParent || !slices.Equal(got.tail, tt.wantTail) {
				t.Errorf("resolve = %+v, %v; want phys %s parent %s tail %q", got, err, tt.wantPhys, tt.wantParent, tt.wantTail)
			}
		})
	}
}

func TestMarkScannerSplitsAnywhere(t *testing.T) {
	mark := newMark("")
	stream := "out put" + mark + "B42\n" + "more " + mark[:5] + " not a mark\n" + mark + "E7\n" + "stray after end"
	wantOut := "out putmore " + mark[:5] + " not a mark\n"
	for _, chunk := range []int{1, 3, 7, len(stream)} {
		var out bytes.Buffer
		var lines []string
		m := &markScanner{mark: []byte(mark), sink: &out, onLine: func(kind byte, arg string) {
			lines = append(lines, string(kind)+arg)
		}}
		for i := 0; i < len(stream); i += chunk {
			_, _ = m.Write([]byte(stream[i:min(i+chunk, len(stream))]))
		}
		if out.String() != wantOut || !slices.Equal(lines, []string{"B42", "E7"}) {
			t.Errorf("chunks of %d: output %q lines %q; want %q [B42 E7]", chunk, out.String(), lines, wantOut)
		}
	}
}

func TestEncodeCommand(t *testing.T) {
	got := encodeCommand("a\nb\\c\td\x7fé%")
	if want := `a\0012b\\c\0011d\0177é%`; got != want {
		t.Errorf("encodeCommand = %q, want %q", got, want)
	}
}

func TestLiteralPrefix(t *testing.T) {
	for pattern, want := range map[string]string{
		"*.go": ".", "src/*.go": "src", "src/pkg/**/x": "src/pkg", "a/b/c.txt": "a/b",
		"{a,b}/*": ".", "a/{b,c}/x": "a", "./a/[xy]/z": "a",
	} {
		if got := literalPrefix(pattern); got != want {
			t.Errorf("literalPrefix(%q) = %q, want %q", pattern, got, want)
		}
	}
}

func TestPoolFallsBackWhenTheServerCannotRun(t *testing.T) {
	// What an image without setsid answers: a message on stderr, then the exec ends.
	var frames bytes.Buffer
	writeFrame(&frames, stdcopy.Stderr, "nexo shell server: setsid not found\n")
	conn, server := net.Pipe()
	defer server.Close()
	go func() { _, _ = io.Copy(io.Discard, server) }()
	f := &fakeClient{
		execCreate: func(id string, o client.ExecCreateOptions) (container.ExecCreateResponse, error) {
			if !o.AttachStdin || o.Cmd[0] != "/bin/sh" {
				t.Errorf("exec options = %+v", o)
			}
			return container.ExecCreateResponse{ID: "exec-1"}, nil
		},
		execAttach: func(string) (client.HijackedResponse, error) {
			return client.HijackedResponse{Conn: conn, Reader: bufio.NewReader(&frames)}, nil
		},
	}
	p := &shellPool{cli: f, containerID: "c", workdir: "/workspace"}
	srv, err := p.get(context.Background())
	if srv != nil || err != nil || !p.unsupported {
		t.Fatalf("get = %v, %v (unsupported %v); want nil, nil and the pool marked unsupported", srv, err, p.unsupported)
	}
	// Later calls do not try again.
	f.execCreate = nil
	if srv, err := p.get(context.Background()); srv != nil || err != nil {
		t.Errorf("second get = %v, %v", srv, err)
	}
}

// writeFrame writes msg as one frame of Docker's multiplexed stream (what StdCopy reads):
// an 8-byte header (the stream, three zero bytes, the length big-endian), then the bytes.
func writeFrame(w *bytes.Buffer, stream stdcopy.StdType, msg string) {
	var hdr [8]byte
	hdr[0] = byte(stream)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(msg)))
	w.Write(hdr[:])
	w.WriteString(msg)
}
