package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRead(t *testing.T) {
	ctx := context.Background()
	st, err := Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	big := []byte("stored bytes, too large to be inline")
	if err := st.Put(ctx, "run-1", "big.txt", big); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "run-1", "changed.txt", []byte("tampered")); err != nil {
		t.Fatal(err)
	}
	text, bin := "hello", []byte{0, 0xff, 1}
	b64 := base64.StdEncoding.EncodeToString(bin)
	tests := []struct {
		name  string
		st    Getter
		a     api.Artifact
		want  string
		isErr error
	}{
		{"inline text", nil, api.Artifact{Name: "a.txt", SHA256: sum([]byte(text)), Content: &text}, text, nil},
		{"inline base64", nil, api.Artifact{Name: "a.bin", SHA256: sum(bin), Encoding: api.EncodingBase64, Content: &b64}, string(bin), nil},
		{"from the store", st, api.Artifact{Name: "big.txt", SHA256: sum(big)}, string(big), nil},
		{"store copy changed", st, api.Artifact{Name: "changed.txt", SHA256: sum([]byte("original"))}, "", ErrChecksum},
		{"inline content does not match", nil, api.Artifact{Name: "a.txt", SHA256: sum([]byte("other")), Content: &text}, "", ErrChecksum},
		{"missing from the store", st, api.Artifact{Name: "gone.txt", SHA256: sum(big)}, "", ErrNotFound},
		{"not inline and no store", nil, api.Artifact{Name: "big.txt", SHA256: sum(big)}, "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(ctx, tt.st, "run-1", tt.a)
			if tt.isErr != nil {
				if !errors.Is(err, tt.isErr) {
					t.Fatalf("Read() error = %v, want %v", err, tt.isErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Read() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSegmentRange(t *testing.T) {
	for name, want := range map[string][3]int64{
		"stream-000000001-000000042.jsonl": {1, 42, 1},
		"stream-7-7.jsonl":                 {7, 7, 1},
		"stream-9-3.jsonl":                 {0, 0, 0},
		"stream-1-2.json":                  {0, 0, 0},
		"notes-1-2.jsonl":                  {0, 0, 0},
		"stream-a-2.jsonl":                 {0, 0, 0},
	} {
		from, to, ok := segmentRange(name)
		if ok != (want[2] == 1) || (ok && (from != want[0] || to != want[1])) {
			t.Errorf("segmentRange(%q) = %d, %d, %v; want %v", name, from, to, ok, want)
		}
	}
}
