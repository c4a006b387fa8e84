// Package payloads is the platform's claim check under Temporal's payload limits: a
// StorageDriver for the SDK's External Storage over the content-addressed blob store
// (artifacts.Blobs), configured on every client and worker the project creates (worker,
// starter, gateway, replayer, tests). Any payload of at least the offload threshold
// (default 256 KiB) — an activity input or result, a signal, an update, a query result, a
// workflow or continue-as-new input — is written to the store as a blob and history keeps a
// small reference naming its sha256 (ARCHITECTURE §10).
//
// It is the safety net, not the design: the platform passes references on purpose where it
// knows payloads grow (threads by head hash, tool outputs by hash). What slips past that is
// caught here instead of failing a workflow task against Temporal's 2 MB limit.
//
// Every process that reads or writes a run must share the store at artifacts.url: a worker
// that cannot find a blob another process wrote fails the task with an error naming the
// claim, and retries it.
package payloads

import (
	"context"
	"errors"
	"fmt"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// DriverName is the name history records with every claim, and the driver's type. Changing
// it would make every payload stored under the old name unreadable.
const DriverName = "nexo-blob"

// ClaimKey is the claim data key holding the blob's sha256.
const ClaimKey = "sha256"

// DefaultThreshold is the SDK's own default offload threshold (bytes of the serialized
// payload), which the config key payloads.offload_threshold defaults to.
const DefaultThreshold = 256 << 10

// Sentinel errors of the package.
var (
	// ErrBadClaim: a claim does not name a blob (no or malformed sha256).
	ErrBadClaim = errors.New("claim names no blob")
	// ErrCorrupt: the blob a claim names is not the payload that was stored.
	ErrCorrupt = errors.New("offloaded payload is corrupt")
)

// ExternalStorage is the SDK configuration of one client or worker: the blob driver over
// blobs, offloading every payload of threshold bytes or more. A threshold of 0 means the
// SDK's default (DefaultThreshold).
func ExternalStorage(blobs artifacts.Blobs, threshold int) converter.ExternalStorage {
	return converter.ExternalStorage{
		Drivers:              []converter.StorageDriver{NewDriver(blobs)},
		PayloadSizeThreshold: threshold,
	}
}

// Driver stores payloads as blobs: the serialized Payload proto (metadata and data) is the
// blob, named by its sha256, so the claim is the sum and nothing else. Writes are
// idempotent (the same payload is the same blob), which suits the SDK retrying a task.
// Safe for concurrent use when blobs is.
type Driver struct {
	blobs artifacts.Blobs
}

// NewDriver returns the driver over blobs.
func NewDriver(blobs artifacts.Blobs) *Driver { return &Driver{blobs: blobs} }

var _ converter.StorageDriver = (*Driver)(nil)

// Name implements converter.StorageDriver.
func (d *Driver) Name() string { return DriverName }

// Type implements converter.StorageDriver.
func (d *Driver) Type() string { return DriverName }

// Store implements converter.StorageDriver: each payload becomes one blob, within the
// SDK's limiter so a message with many large payloads does not flood the store.
func (d *Driver) Store(ctx converter.StorageDriverStoreContext, ps []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	claims := make([]converter.StorageDriverClaim, len(ps))
	limiter := ctx.GetLimiter()
	err := each(len(ps), func(i int) error {
		return limiter.Permit(ctx.Context, ps[i], func() error {
			data, err := proto.Marshal(ps[i])
			if err != nil {
				return fmt.Errorf("serialize payload %d: %w", i, err)
			}
			sum, err := d.blobs.PutBlob(ctx.Context, data)
			if err != nil {
				return fmt.Errorf("store payload %d (%d bytes) in the blob store: %w", i, len(data), err)
			}
			offloaded.Add(int64(len(data)))
			claims[i] = converter.StorageDriverClaim{ClaimData: map[string]string{ClaimKey: sum}}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// Retrieve implements converter.StorageDriver: it reads each claim's blob, checks it
// against the sum (whatever the store checked) and restores the payload.
func (d *Driver) Retrieve(ctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(claims))
	limiter := ctx.GetLimiter()
	err := each(len(claims), func(i int) error {
		return limiter.Permit(ctx.Context, claims[i], func() error {
			p, err := d.retrieve(ctx.Context, claims[i])
			out[i] = p
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *Driver) retrieve(ctx context.Context, claim converter.StorageDriverClaim) (*commonpb.Payload, error) {
	sum := claim.ClaimData[ClaimKey]
	if !artifacts.ValidSum(sum) {
		return nil, fmt.Errorf("retrieve offloaded payload: claim %v: %w (want %s: 64 hex digits)", claim.ClaimData, ErrBadClaim, ClaimKey)
	}
	data, err := d.blobs.GetBlob(ctx, sum)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, fmt.Errorf("retrieve offloaded payload sha256 %s: %w (every worker, starter and gateway must share the blob store at artifacts.url)", sum, err)
	}
	if errors.Is(err, artifacts.ErrChecksum) {
		// Led by what is wrong, not by the driver: this text reaches the user through a
		// failed workflow task or query, whose wrapping names only the storage driver.
		return nil, fmt.Errorf("%s offloaded payload %s do not match their sha256 (%w: %w; restore the blob from a backup of the store, or end the run with `starter cancel <run> --terminate`)",
			api.StoreCorruptLead, sum, ErrCorrupt, err)
	}
	if err != nil {
		return nil, fmt.Errorf("retrieve offloaded payload sha256 %s: %w", sum, err)
	}
	if got := artifacts.Sum(data); got != sum {
		return nil, fmt.Errorf("%s offloaded payload %s do not match their sha256 (they hash to %s): %w", api.StoreCorruptLead, sum, got, ErrCorrupt)
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("retrieve offloaded payload sha256 %s: %w (%v)", sum, ErrCorrupt, err)
	}
	return &p, nil
}

// each runs fn(0..n-1) concurrently (the limiter bounds how many run at once) and joins
// their errors.
func each(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Wire format of a reference, as the SDK writes it (temporal.api.sdk.v1.ExternalStorageReference
// in protojson); see IsReference.
var referenceMessageType = string((*sdkpb.ExternalStorageReference)(nil).ProtoReflect().Descriptor().FullName())

// IsReference reports whether p is an External Storage reference rather than a value: what
// a reader of raw history (GetWorkflowHistory, which the SDK does not resolve) sees in
// place of an offloaded payload.
func IsReference(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingProtoJSON &&
		string(p.GetMetadata()[converter.MetadataMessageType]) == referenceMessageType
}

// Resolve returns the payload a reference stands for, and p itself when it is not a
// reference. It is for readers of raw history; the SDK resolves references on every other
// path. A reference written by another driver is an error naming it.
func (d *Driver) Resolve(ctx context.Context, p *commonpb.Payload) (*commonpb.Payload, error) {
	if !IsReference(p) {
		return p, nil
	}
	var ref sdkpb.ExternalStorageReference
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(p.GetData(), &ref); err != nil {
		return nil, fmt.Errorf("read external storage reference: %w", err)
	}
	if ref.GetDriverName() != DriverName {
		return nil, fmt.Errorf("payload was offloaded by storage driver %q, not %s", ref.GetDriverName(), DriverName)
	}
	return d.retrieve(ctx, converter.StorageDriverClaim{ClaimData: ref.GetClaimData()})
}
