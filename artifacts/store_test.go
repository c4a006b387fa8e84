package artifacts

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestDirRoundTripAndGuards(t *testing.T) {
	ctx := context.Background()
	st, err := Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin := []byte{0, 1, 2, 0xff, 0xfe}
	if err := st.Put(ctx, "run-1", "a.bin", bin); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "run-1", "a.bin")
	if err != nil || string(got) != string(bin) {
		t.Fatalf("Get = %v, %v; want %v", got, err, bin)
	}
	if _, err := st.Get(ctx, "run-1", "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: err = %v, want ErrNotFound", err)
	}
	for _, bad := range []struct{ run, name string }{{"run-1", "../x"}, {"..", "a"}, {"run-1", ""}, {"a/b", "c"}, {"run-1", "x\x00y"}} {
		if err := st.Put(ctx, bad.run, bad.name, []byte("x")); err == nil {
			t.Errorf("Put(%q, %q) succeeded, want an error", bad.run, bad.name)
		}
	}
}

func TestOpenForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct{ url, want string }{
		{"file://.nexo/artifacts", filepath.Join(dir, ".nexo/artifacts")},
		{".nexo/artifacts", filepath.Join(dir, ".nexo/artifacts")},
		{"file:///tmp/x", "/tmp/x"},
	} {
		st, err := Open(tc.url)
		if err != nil {
			t.Fatalf("Open(%q): %v", tc.url, err)
		}
		if got := st.(*Dir).Root; got != tc.want {
			t.Errorf("Open(%q) root = %q, want %q", tc.url, got, tc.want)
		}
	}
	if _, err := Open("s3://bucket"); err == nil {
		t.Error("Open(s3://) succeeded, want an unsupported-scheme error")
	}
}
