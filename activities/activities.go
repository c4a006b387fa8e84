package activities

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// MaxArtifactBytes bounds an artifact read from a sandbox file (it is held in memory).
const MaxArtifactBytes = api.MaxArtifactBytes

// WriteArtifact stores an artifact's bytes and returns its metadata, with the content
// inline when it is at most the inline limit (base64 when it is not UTF-8).
func (a *Host) WriteArtifact(ctx context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
	body := req.Content
	if req.Blob != "" {
		if !artifacts.ValidSum(req.Blob) {
			return api.Artifact{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("artifact %s: blob %q is not a blob name (a sha256)", req.Name, req.Blob), api.ErrTypeBadInput, nil)
		}
		b, err := a.store.GetBlob(ctx, req.Blob)
		if err != nil {
			return api.Artifact{}, within("artifact "+req.Name, blobError("stored blob", req.Blob, err))
		}
		body = b
	}
	if req.Path != "" {
		sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
		if err != nil {
			return api.Artifact{}, classify(fmt.Errorf("artifact %s: %w", req.Name, err))
		}
		// The file is read whole into the worker's memory: refuse one that would not fit
		// before reading it, rather than letting it take the worker down.
		if fi, err := sb.Stat(ctx, req.Path); err == nil && fi.Size > MaxArtifactBytes {
			return api.Artifact{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("artifact %s: %s is %d bytes, over the %d an artifact may hold", req.Name, req.Path, fi.Size, MaxArtifactBytes),
				api.ErrTypeTooLarge, nil)
		}
		body, err = sb.Read(ctx, req.Path)
		if err != nil {
			return api.Artifact{}, classify(fmt.Errorf("artifact %s: read %s from the run's sandbox: %w", req.Name, req.Path, err))
		}
	}
	if err := a.store.Put(ctx, req.RunID, req.Name, body); err != nil {
		return api.Artifact{}, fmt.Errorf("write artifact %s of run %s: %w", req.Name, req.RunID, err)
	}
	sum := sha256.Sum256(body)
	meta := api.Artifact{
		Name:   req.Name,
		At:     time.Now().UTC(),
		Size:   int64(len(body)),
		SHA256: hex.EncodeToString(sum[:]),
	}
	text := utf8.Valid(body)
	if !text {
		meta.Encoding = api.EncodingBase64
	}
	if len(body) <= a.inlineLimit {
		content := string(body)
		if !text {
			content = base64.StdEncoding.EncodeToString(body)
		}
		meta.Content = &content
	}
	return meta, nil
}

// StageFiles writes files into the run's sandbox.
func (a *Host) StageFiles(ctx context.Context, req api.StageFilesRequest) (api.StageFilesResult, error) {
	sb, _, err := a.sandboxes.OpenFrom(ctx, req.RunID, req.Sandbox, req.Base)
	if err != nil {
		return api.StageFilesResult{}, classify(fmt.Errorf("stage files: %w", err))
	}
	var res api.StageFilesResult
	for _, f := range req.Files {
		p, err := sb.Write(ctx, f.Path, f.Content)
		if err != nil {
			return api.StageFilesResult{}, classify(fmt.Errorf("stage %s: %w", f.Path, err))
		}
		res.Paths = append(res.Paths, p)
	}
	if req.Snapshot && snapshotEligible(req.Sandbox) {
		ref, err := a.snapshotWorkspace(ctx, req.RunID, req.Sandbox, sb)
		if err != nil {
			return api.StageFilesResult{}, classifyArchive(fmt.Errorf("stage files: snapshot the workspace: %w", err))
		}
		res.Snapshot = &ref
	}
	return res, nil
}

// ReleaseSandbox closes the run's sandbox and removes it when the run owns it.
func (a *Host) ReleaseSandbox(ctx context.Context, req api.ReleaseSandboxRequest) error {
	return a.sandboxes.Release(ctx, req.RunID, req.Sandbox)
}

// classify turns errors that retrying cannot fix into non-retryable application errors.
func classify(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrEscape):
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeEscape, err)
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, artifacts.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeNotFound, err)
	case errors.Is(err, ErrSandboxUnavailable), errors.Is(err, docker.ErrImageNotFound), errors.Is(err, docker.ErrInvalidOptions),
		errors.Is(err, sandbox.ErrNotRegular): // a FIFO stays a FIFO: retrying cannot help
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, err)
	}
	return err
}
