package payloads

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/artifacts"
)

// fakeBlobs is an artifacts.Blobs with function fields.
type fakeBlobs struct {
	put func(ctx context.Context, data []byte) (string, error)
	get func(ctx context.Context, sum string) ([]byte, error)
}

func (f fakeBlobs) PutBlob(ctx context.Context, data []byte) (string, error) { return f.put(ctx, data) }
func (f fakeBlobs) GetBlob(ctx context.Context, sum string) ([]byte, error)  { return f.get(ctx, sum) }

// memStore is an empty in-memory blob store, closed when the test ends.
func memStore(t *testing.T) artifacts.Store {
	t.Helper()
	st, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func jsonPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func storeCtx() converter.StorageDriverStoreContext {
	return converter.StorageDriverStoreContext{Context: context.Background()}
}

func retrieveCtx() converter.StorageDriverRetrieveContext {
	return converter.StorageDriverRetrieveContext{Context: context.Background()}
}

func TestDriverRoundtrip(t *testing.T) {
	store := memStore(t)
	d := NewDriver(store)
	in := []*commonpb.Payload{
		jsonPayload(t, map[string]string{"doc": strings.Repeat("a", 300<<10)}),
		jsonPayload(t, "second"),
		{Metadata: map[string][]byte{"encoding": []byte("binary/plain")}, Data: []byte{0, 1, 2, 255}},
	}
	claims, err := d.Store(storeCtx(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != len(in) {
		t.Fatalf("got %d claims for %d payloads", len(claims), len(in))
	}
	for i, c := range claims {
		sum := c.ClaimData[ClaimKey]
		raw, err := proto.Marshal(in[i])
		if err != nil {
			t.Fatal(err)
		}
		if want := artifacts.Sum(raw); sum != want {
			t.Errorf("claim %d: sha256 %q, want the sum of the serialized payload %s", i, sum, want)
		}
		if b, err := store.GetBlob(context.Background(), sum); err != nil || !bytes.Equal(b, raw) {
			t.Errorf("claim %d: blob %s in the store: %d bytes, %v", i, sum, len(b), err)
		}
	}
	out, err := d.Retrieve(retrieveCtx(), claims)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !proto.Equal(out[i], in[i]) {
			t.Errorf("payload %d: retrieved %v, want %v", i, out[i].GetMetadata(), in[i].GetMetadata())
		}
	}
}

func TestRetrieveErrors(t *testing.T) {
	good := jsonPayload(t, "hello")
	raw, _ := proto.Marshal(good)
	sum := artifacts.Sum(raw)
	other := artifacts.Sum([]byte("other bytes"))
	tests := []struct {
		name    string
		claim   map[string]string
		get     func(context.Context, string) ([]byte, error)
		want    error
		mention []string
	}{
		{name: "missing blob", claim: map[string]string{ClaimKey: sum},
			get:     memStore(t).GetBlob,
			want:    artifacts.ErrNotFound,
			mention: []string{sum, "artifacts.url"}},
		{name: "bytes do not match the claim", claim: map[string]string{ClaimKey: other},
			get:     func(context.Context, string) ([]byte, error) { return raw, nil }, // a store that does not check
			want:    ErrCorrupt,
			mention: []string{other, sum}},
		{name: "blob is not a payload", claim: map[string]string{ClaimKey: artifacts.Sum([]byte{0xff, 0xff, 0xff})},
			get:     func(context.Context, string) ([]byte, error) { return []byte{0xff, 0xff, 0xff}, nil },
			want:    ErrCorrupt,
			mention: []string{artifacts.Sum([]byte{0xff, 0xff, 0xff})}},
		{name: "claim without a sum", claim: map[string]string{"key": "x"},
			want:    ErrBadClaim,
			mention: []string{"key:x"}},
		{name: "claim with a malformed sum", claim: map[string]string{ClaimKey: "../../etc/passwd"},
			want:    ErrBadClaim,
			mention: []string{"../../etc/passwd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			get := tt.get
			if get == nil {
				get = func(context.Context, string) ([]byte, error) {
					t.Fatal("GetBlob called for a claim that names no blob")
					return nil, nil
				}
			}
			d := NewDriver(fakeBlobs{get: get})
			_, err := d.Retrieve(retrieveCtx(), []converter.StorageDriverClaim{{ClaimData: tt.claim}})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Retrieve = %v, want %v", err, tt.want)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestStoreError(t *testing.T) {
	boom := errors.New("disk full")
	d := NewDriver(fakeBlobs{put: func(context.Context, []byte) (string, error) { return "", boom }})
	_, err := d.Store(storeCtx(), []*commonpb.Payload{jsonPayload(t, "x")})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "blob store") {
		t.Fatalf("Store = %v, want the store's error wrapped", err)
	}
}

// codec runs payloads through the SDK's own External Storage path (the codec handler the
// gateway serves applies exactly the visitors a client and a worker apply).
func codec(t *testing.T, es converter.ExternalStorage, op string, ps ...*commonpb.Payload) []*commonpb.Payload {
	t.Helper()
	h, err := converter.NewPayloadHTTPHandler(converter.PayloadHTTPHandlerOptions{ExternalStorage: es})
	if err != nil {
		t.Fatal(err)
	}
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+op, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", op, rec.Code, rec.Body)
	}
	var out commonpb.Payloads
	if err := protojson.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out.Payloads
}

func TestExternalStorageThroughSDK(t *testing.T) {
	store := memStore(t)
	es := ExternalStorage(store, 0)
	big := jsonPayload(t, map[string]string{"doc": strings.Repeat("x", DefaultThreshold)})
	small := jsonPayload(t, map[string]string{"doc": strings.Repeat("x", DefaultThreshold-1024)})

	encoded := codec(t, es, "encode", big, small)
	ref := encoded[0]
	if !IsReference(ref) {
		t.Fatalf("a %d-byte payload was not offloaded: metadata %v", proto.Size(big), ref.GetMetadata())
	}
	if proto.Size(ref) > 1024 {
		t.Errorf("reference is %d bytes, want a small claim", proto.Size(ref))
	}
	if got := ref.GetExternalPayloads(); len(got) != 1 || got[0].GetSizeBytes() != int64(proto.Size(big)) {
		t.Errorf("reference size details %v, want the %d bytes stored", got, proto.Size(big))
	}
	if !proto.Equal(encoded[1], small) {
		t.Errorf("a %d-byte payload (under the %d threshold) did not stay inline", proto.Size(small), DefaultThreshold)
	}

	decoded := codec(t, es, "decode", encoded...)
	if !proto.Equal(decoded[0], big) || !proto.Equal(decoded[1], small) {
		t.Errorf("decode did not restore the payloads")
	}

	resolved, err := NewDriver(store).Resolve(context.Background(), ref)
	if err != nil || !proto.Equal(resolved, big) {
		t.Errorf("Resolve(reference) = %v, want the original payload", err)
	}
	if p, err := NewDriver(store).Resolve(context.Background(), small); err != nil || p != small {
		t.Errorf("Resolve(value) = %v, %v; want the value itself", p, err)
	}
}

func TestThresholdIsConfigurable(t *testing.T) {
	es := ExternalStorage(memStore(t), 1024)
	p := jsonPayload(t, strings.Repeat("y", 2048))
	if out := codec(t, es, "encode", p); !IsReference(out[0]) {
		t.Errorf("a 2 KiB payload with a 1 KiB threshold stayed inline")
	}
}

func TestResolveForeignDriver(t *testing.T) {
	ref := codec(t, converter.ExternalStorage{Drivers: []converter.StorageDriver{otherDriver{}}}, "encode",
		jsonPayload(t, strings.Repeat("z", DefaultThreshold)))[0]
	_, err := NewDriver(memStore(t)).Resolve(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), `"s3"`) {
		t.Fatalf("Resolve of another driver's reference = %v, want an error naming the driver", err)
	}
}

// otherDriver stands for a driver this package did not write.
type otherDriver struct{}

func (otherDriver) Name() string { return "s3" }
func (otherDriver) Type() string { return "s3" }
func (otherDriver) Store(_ converter.StorageDriverStoreContext, ps []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	return make([]converter.StorageDriverClaim, len(ps)), nil
}
func (otherDriver) Retrieve(converter.StorageDriverRetrieveContext, []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	return nil, errors.New("not here")
}
