package workflows

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"path"
	"strings"
	texttemplate "text/template"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// ArtifactSource says where an artifact's bytes come from. Precedence when several are
// set: Path, then Template, then Content.
type ArtifactSource struct {
	// Content is the body, verbatim. Bytes that are not UTF-8 are kept base64 in the record.
	Content []byte
	// Template is a trusted Go template rendered with Data inside the workflow (pure, so
	// deterministic). Artifacts named *.html or *.htm use html/template, which escapes
	// Data; others use text/template. Ship templates with the worker (go:embed), never
	// from model or user input: a template is code.
	Template string
	Data     any
	// Path copies a file from the run's sandbox verbatim (an agent's output).
	Path string
	// Blob copies a blob of the store verbatim: an agent's answer stored by reference
	// (api.AgentResult.ContentRef, set when the answer is over api.TextInlineMax and
	// Content is only its preview).
	Blob string
}

// Artifact stores a named artifact of the run in the artifact store (through an activity)
// and records its metadata, with the content inline when it is small. A second artifact of
// the same name replaces the first.
func Artifact(ctx workflow.Context, name string, src ArtifactSource) (api.Artifact, error) {
	rt, err := runtimeOf(ctx, "artifact "+name)
	if err != nil {
		return api.Artifact{}, err
	}
	return rt.artifact(ctx, name, src, true)
}

// artifact stores an artifact; emit=false keeps it out of the event log (a session's
// archived stream segment must not add an event after the segment it archives).
func (rt *runtime) artifact(ctx workflow.Context, name string, src ArtifactSource, emit bool) (api.Artifact, error) {
	if err := checkArtifactName(name); err != nil {
		return api.Artifact{}, err
	}
	req := api.WriteArtifactRequest{RunID: rt.rec.ID, Name: name, Sandbox: rt.sandbox}
	switch {
	case src.Path != "":
		req.Path = src.Path
		rt.sandboxUsed = true
	case src.Template != "":
		body, err := render(name, src.Template, src.Data)
		if err != nil {
			return api.Artifact{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("artifact %s: %v", name, err), api.ErrTypeBadInput, nil)
		}
		req.Content = body
	case src.Content != nil:
		req.Content = src.Content
	case src.Blob != "":
		req.Blob = src.Blob
	default:
		return api.Artifact{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("artifact %s needs Content, Template, Path or Blob", name), api.ErrTypeBadInput, nil)
	}
	if len(req.Content) > api.MaxArtifactBytes {
		return api.Artifact{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("artifact %s is %d bytes, over the %d an artifact may hold", name, len(req.Content), api.MaxArtifactBytes),
			api.ErrTypeTooLarge, nil)
	}
	var meta api.Artifact
	if err := rt.onSandbox(ctx, nil, api.ActivityWriteArtifact, req, &meta); err != nil {
		return api.Artifact{}, wrap(err, "artifact %s", name)
	}
	replaced := false
	for i := range rt.rec.Artifacts {
		if rt.rec.Artifacts[i].Name == name {
			rt.rec.Artifacts[i] = meta
			replaced = true
		}
	}
	if !replaced {
		rt.rec.Artifacts = append(rt.rec.Artifacts, meta)
	}
	if emit {
		rt.emit(ctx, "artifact", map[string]any{"name": name, "size": meta.Size, "sha256": meta.SHA256})
	}
	return meta, nil
}

func checkArtifactName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || path.Clean(name) != name {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("artifact name %q must be a plain file name (no slashes, not . or ..)", name),
			api.ErrTypeBadInput, nil)
	}
	return nil
}

func render(name, tmpl string, data any) ([]byte, error) {
	var buf bytes.Buffer
	ext := strings.ToLower(path.Ext(name))
	if ext == ".html" || ext == ".htm" {
		t, err := htmltemplate.New(name).Option("missingkey=error").Parse(tmpl)
		if err != nil {
			return nil, fmt.Errorf("parse template: %w", err)
		}
		if err := t.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("render template: %w", err)
		}
		return buf.Bytes(), nil
	}
	t, err := texttemplate.New(name).Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render template: %w", err)
	}
	return buf.Bytes(), nil
}

// Stage writes files into the run's sandbox (through an activity), emits a "staged"
// event with the count, and returns the count. Keys are workspace-relative paths.
func Stage(ctx workflow.Context, files map[string][]byte) (int, error) {
	rt, err := runtimeOf(ctx, fmt.Sprintf("stage %d files", len(files)))
	if err != nil {
		return 0, err
	}
	req := api.StageFilesRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox}
	for _, p := range sortedKeys(files) {
		if len(files[p]) > api.MaxArtifactBytes {
			return 0, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("stage %s: %d bytes, over the %d a staged file may hold", p, len(files[p]), api.MaxArtifactBytes),
				api.ErrTypeTooLarge, nil)
		}
		req.Files = append(req.Files, api.StagedFile{Path: p, Content: files[p]})
	}
	rt.sandboxUsed = true
	req.Snapshot, req.Base = rt.snapshotsOn(ctx), rt.snapshotBase()
	var res api.StageFilesResult
	if err := rt.onSandbox(ctx, nil, api.ActivityStageFiles, req, &res); err != nil {
		return 0, wrap(err, "stage %d files", len(files))
	}
	rt.noteSnapshot(ctx, res.Snapshot, "")
	rt.emit(ctx, "staged", map[string]int{"count": len(req.Files)})
	return len(req.Files), nil
}
