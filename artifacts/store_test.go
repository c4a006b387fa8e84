package artifacts

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// backends opens one store of each kind the tests cover: a directory and memory.
func backends(t *testing.T) map[string]*Bucket {
	t.Helper()
	out := map[string]*Bucket{}
	for name, u := range map[string]string{"file": "file://" + t.TempDir(), "mem": "mem://"} {
		st, err := OpenWith(context.Background(), u, Options{CacheBytes: DefaultCacheBytes})
		if err != nil {
			t.Fatalf("OpenWith(%q): %v", u, err)
		}
		t.Cleanup(func() { _ = st.Close() })
		out[name] = st
	}
	return out
}

func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	for kind, st := range backends(t) {
		t.Run(kind, func(t *testing.T) {
			bin := []byte{0, 1, 2, 0xff, 0xfe}
			if err := st.Put(ctx, "run-1", "a.bin", bin); err != nil {
				t.Fatal(err)
			}
			if got, err := st.Get(ctx, "run-1", "a.bin"); err != nil || !bytes.Equal(got, bin) {
				t.Fatalf("Get = %v, %v; want %v", got, err, bin)
			}
			if err := st.Put(ctx, "run-1", "a.bin", []byte("v2")); err != nil {
				t.Fatal(err)
			}
			if got, err := st.Get(ctx, "run-1", "a.bin"); err != nil || string(got) != "v2" {
				t.Fatalf("Get after a second Put = %q, %v; want v2 (Put replaces)", got, err)
			}
			if _, err := st.Get(ctx, "run-1", "missing"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get missing: err = %v, want ErrNotFound", err)
			}

			sum, err := st.PutBlob(ctx, []byte("thread segment"))
			if err != nil || sum != Sum([]byte("thread segment")) {
				t.Fatalf("PutBlob = %q, %v; want %q", sum, err, Sum([]byte("thread segment")))
			}
			if got, err := st.GetBlob(ctx, sum); err != nil || string(got) != "thread segment" {
				t.Fatalf("GetBlob = %q, %v", got, err)
			}
			if _, err := st.GetBlob(ctx, Sum([]byte("never stored"))); !errors.Is(err, ErrNotFound) {
				t.Fatalf("GetBlob missing: err = %v, want ErrNotFound", err)
			}
			if _, err := st.GetBlob(ctx, "../run-1/a.bin"); err == nil || errors.Is(err, ErrNotFound) {
				t.Fatalf("GetBlob of a non-sha256 name: err = %v, want a bad-name error", err)
			}
		})
	}
}

func TestPutRefusesNamesThatAreNotPlain(t *testing.T) {
	ctx := context.Background()
	for kind, st := range backends(t) {
		for _, bad := range []struct{ run, name string }{
			{"run-1", "../x"}, {"..", "a"}, {"run-1", ""}, {"a/b", "c"}, {"run-1", "x\x00y"}, {"run-1", `a\b`},
			{"blobs", Sum([]byte("x"))}, // would land on a blob's key
		} {
			if err := st.Put(ctx, bad.run, bad.name, []byte("x")); err == nil {
				t.Errorf("%s: Put(%q, %q) succeeded, want an error", kind, bad.run, bad.name)
			}
		}
	}
}

// A blob is written once: a second PutBlob of the same bytes does not write (seen by
// planting other bytes under the name first), and different bytes get their own name.
func TestPutBlobWritesOnce(t *testing.T) {
	ctx := context.Background()
	for kind, st := range backends(t) {
		t.Run(kind, func(t *testing.T) {
			a, b := []byte("first bytes"), []byte("other bytes")
			sumA, err := st.PutBlob(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.b.WriteAll(ctx, blobKey(sumA), []byte("planted"), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := st.PutBlob(ctx, a); err != nil {
				t.Fatalf("second PutBlob: %v", err)
			}
			if got, _ := st.b.ReadAll(ctx, blobKey(sumA)); string(got) != "planted" {
				t.Fatalf("blob after a second PutBlob of the same bytes = %q, want it untouched (planted)", got)
			}
			sumB, err := st.PutBlob(ctx, b)
			if err != nil || sumB == sumA {
				t.Fatalf("PutBlob(other bytes) = %q, %v; want a new name", sumB, err)
			}
			if got, _ := st.b.ReadAll(ctx, blobKey(sumA)); string(got) != "planted" {
				t.Fatalf("blob %s after writing other bytes = %q, want it untouched", sumA, got)
			}
			if got, err := st.GetBlob(ctx, sumB); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("GetBlob(%s) = %q, %v; want %q", sumB, got, err, b)
			}
		})
	}
}

// A blob whose bytes on disk no longer match its name is reported, not served.
func TestGetBlobDetectsCorruption(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	w, err := Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sum, err := w.PutBlob(ctx, []byte("the original"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "blobs", sum), []byte("the original, changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open("file://" + root) // another process: nothing cached
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.GetBlob(ctx, sum); !errors.Is(err, ErrChecksum) {
		t.Fatalf("GetBlob of a changed file = %q, %v; want ErrChecksum", got, err)
	}
	// Once detected it stays detected: a bad copy is never cached.
	if _, err := r.GetBlob(ctx, sum); !errors.Is(err, ErrChecksum) {
		t.Fatalf("second GetBlob of a changed file: err = %v, want ErrChecksum", err)
	}
}

// The cache serves blobs without the bucket, holds at most its byte bound, and drops the
// least recently used first.
func TestBlobCacheEvictsByBytes(t *testing.T) {
	ctx := context.Background()
	st, err := OpenWith(ctx, "mem://", Options{CacheBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	put := func(s string) string {
		t.Helper()
		sum, err := st.PutBlob(ctx, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	a, b := put("aaaa"), put("bbbb")
	if _, err := st.GetBlob(ctx, a); err != nil { // a is now the most recently used
		t.Fatal(err)
	}
	c := put("cccc") // 12 bytes > 10: b goes
	big := put("0123456789x")
	// Delete every blob from the bucket: what GetBlob still returns came from the cache.
	for _, sum := range []string{a, b, c, big} {
		if err := st.b.Delete(ctx, blobKey(sum)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, sum, want string
	}{
		{"recently read", a, "aaaa"},
		{"least recently used", b, ""},
		{"newest", c, "cccc"},
		{"larger than the cache", big, ""},
	} {
		got, err := st.GetBlob(ctx, tc.sum)
		if tc.want == "" {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: GetBlob = %q, %v; want it evicted (ErrNotFound once the bucket lost it)", tc.name, got, err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: GetBlob = %q, %v; want %q from the cache", tc.name, got, err, tc.want)
		}
	}
	if n, size := st.cache.size(); n != 2 || size != 8 {
		t.Errorf("cache holds %d blobs, %d bytes; want 2, 8", n, size)
	}
}

func TestBlobCacheReturnsCopies(t *testing.T) {
	ctx := context.Background()
	st, err := OpenWith(ctx, "mem://", Options{CacheBytes: DefaultCacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data := []byte("immutable")
	sum, err := st.PutBlob(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	data[0] = 'X' // the caller's slice is the caller's
	got, err := st.GetBlob(ctx, sum)
	if err != nil || string(got) != "immutable" {
		t.Fatalf("GetBlob = %q, %v; want immutable", got, err)
	}
	got[0] = 'Y'
	if again, _ := st.GetBlob(ctx, sum); string(again) != "immutable" {
		t.Fatalf("GetBlob after the caller changed its copy = %q, want immutable", again)
	}
}

func TestCacheDisabled(t *testing.T) {
	ctx := context.Background()
	st, err := OpenWith(ctx, "mem://", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sum, err := st.PutBlob(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.b.Delete(ctx, blobKey(sum)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetBlob(ctx, sum); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetBlob without a cache after the bucket lost it: err = %v, want ErrNotFound", err)
	}
}

// A directory written by the earlier directory-only store (<root>/<run>/<name>,
// <root>/blobs/<sha256>, no metadata files) reads the same through the blob store.
func TestReadsTheEarlierDirectoryLayout(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blob := []byte("a blob from before")
	for p, body := range map[string][]byte{
		"run-1/report.txt":                             []byte("report"),
		"run-1/__workspace.tar":                        []byte("tar bytes"),
		"session:a:b/stream-000000001-000000042.jsonl": []byte(`{"seq":1}` + "\n"),
		"run-1/__skillfile." + Sum([]byte("sh")):       []byte("sh"),
		"blobs/" + Sum(blob):                           blob,
	} {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct{ run, name, want string }{
		{"run-1", "report.txt", "report"},
		{"run-1", "__workspace.tar", "tar bytes"},
		{"session:a:b", "stream-000000001-000000042.jsonl", `{"seq":1}` + "\n"},
		{"run-1", "__skillfile." + Sum([]byte("sh")), "sh"},
	} {
		if got, err := st.Get(ctx, tc.run, tc.name); err != nil || string(got) != tc.want {
			t.Errorf("Get(%s, %s) = %q, %v; want %q", tc.run, tc.name, got, err, tc.want)
		}
	}
	if got, err := st.GetBlob(ctx, Sum(blob)); err != nil || !bytes.Equal(got, blob) {
		t.Errorf("GetBlob = %q, %v; want %q", got, err, blob)
	}
	// And what it writes keeps that layout: no sidecar files.
	if err := st.Put(ctx, "run-2", "new.txt", []byte("new")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "run-2"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "new.txt" {
		t.Fatalf("run-2 holds %v (%v); want only new.txt", entries, err)
	}
}

// Two processes that open the same URL see one store: what one writes, the other reads.
func TestTwoOpensOfOneURLShareTheStore(t *testing.T) {
	ctx := context.Background()
	u := "file://" + t.TempDir()
	worker, err := Open(u)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	starter, err := Open(u)
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	if err := worker.Put(ctx, "run-1", "out.txt", []byte("written by the worker")); err != nil {
		t.Fatal(err)
	}
	sum, err := worker.PutBlob(ctx, []byte("a thread"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := starter.Get(ctx, "run-1", "out.txt"); err != nil || string(got) != "written by the worker" {
		t.Errorf("other Open: Get = %q, %v", got, err)
	}
	if got, err := starter.GetBlob(ctx, sum); err != nil || string(got) != "a thread" {
		t.Errorf("other Open: GetBlob = %q, %v", got, err)
	}
	if again, err := starter.PutBlob(ctx, []byte("a thread")); err != nil || again != sum {
		t.Errorf("other Open: PutBlob of the same bytes = %q, %v; want %q", again, err, sum)
	}
}

func TestOpenForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct{ url, wantLoc string }{
		{"file://.nexo/artifacts", filepath.Join(dir, ".nexo/artifacts/r/a")},
		{".nexo/artifacts", filepath.Join(dir, ".nexo/artifacts/r/a")},
		{"file://" + dir + "/abs", filepath.Join(dir, "abs/r/a")},
		{"mem://", "mem:///r/a"},
		{"s3://nexo-test?region=us-east-1&prefix=nexo/", "s3://nexo-test/nexo/r/a"},
		{"gs://nexo-test?anonymous=true", "gs://nexo-test/r/a"},
		{"azblob://nexo-test", "azblob://nexo-test/r/a"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			// Credentials the drivers accept at open time; nothing here reaches a network.
			t.Setenv("AWS_ACCESS_KEY_ID", "test")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
			t.Setenv("AZURE_STORAGE_ACCOUNT", "nexotest")
			t.Setenv("AZURE_STORAGE_KEY", base64.StdEncoding.EncodeToString([]byte("key")))
			st, err := Open(tc.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.url, err)
			}
			defer st.Close()
			if got := st.Location("r", "a"); got != tc.wantLoc {
				t.Errorf("Location = %q, want %q", got, tc.wantLoc)
			}
		})
	}

	// A relative store stays where it was opened when the process changes directory.
	st, err := Open("file://rel")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Chdir(t.TempDir())
	if err := st.Put(context.Background(), "r", "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "rel", "r", "a")); err != nil {
		t.Errorf("relative store after a chdir: %v", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"ftp://host/x", `open artifact store "ftp://host/x": scheme "ftp" is not supported (want a directory or a URL with one of the schemes file://, mem://, s3://, gs://, azblob://)`},
		{"file://", `open artifact store "file://": no directory`},
		{"s3://", `open artifact store "s3://": no bucket (want s3://<bucket>)`},
		{"", "open artifact store: empty URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			st, err := Open(tc.url)
			if err == nil {
				st.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) error = %q, want it to contain %q", tc.url, err, tc.want)
			}
		})
	}
}

// failingReader yields some bytes, then an error: a workspace archive cut off mid-way.
type failingReader struct{ sent bool }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.sent {
		return 0, errors.New("connection to the container lost")
	}
	f.sent = true
	return copy(p, "half a tar"), nil
}

func TestPutFromStreams(t *testing.T) {
	ctx := context.Background()
	for kind, st := range backends(t) {
		t.Run(kind, func(t *testing.T) {
			big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
			n, err := st.PutFrom(ctx, "run-1", "__workspace.tar", bytes.NewReader(big))
			if err != nil || n != int64(len(big)) {
				t.Fatalf("PutFrom = %d, %v; want %d", n, err, len(big))
			}
			rc, err := st.GetReader(ctx, "run-1", "__workspace.tar")
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if _, err := got.ReadFrom(rc); err != nil || rc.Close() != nil || !bytes.Equal(got.Bytes(), big) {
				t.Fatalf("GetReader read %d bytes, %v; want the %d written", got.Len(), err, len(big))
			}

			// A copy that fails part-way leaves the earlier archive whole.
			if _, err := st.PutFrom(ctx, "run-1", "__workspace.tar", &failingReader{}); err == nil || !strings.Contains(err.Error(), "connection to the container lost") {
				t.Fatalf("PutFrom of a failing reader: err = %v, want the reader's error", err)
			}
			if b, err := st.Get(ctx, "run-1", "__workspace.tar"); err != nil || !bytes.Equal(b, big) {
				t.Fatalf("after a failed PutFrom: Get = %d bytes, %v; want the earlier %d", len(b), err, len(big))
			}
			if _, err := st.PutFrom(ctx, "run-2", "x", &failingReader{}); err == nil {
				t.Fatal("PutFrom of a failing reader to a new name succeeded")
			}
			if _, err := st.Get(ctx, "run-2", "x"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after a failed PutFrom to a new name: Get err = %v, want ErrNotFound", err)
			}
			if st.file {
				if left, _ := os.ReadDir(filepath.Join(st.base, "run-2")); len(left) != 0 {
					t.Errorf("a failed PutFrom left %v behind", left)
				}
			}
			if _, err := st.GetReader(ctx, "run-2", "missing"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("GetReader missing: err = %v, want ErrNotFound", err)
			}
		})
	}
}
