package activities

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox"
)

// Workspace snapshots (api/snapshot.go): after a tool call that can change the workspace,
// the host that holds it stores a manifest of every entry and the bytes of each file the
// store does not hold yet, and the call's result carries the manifest's name. A file whose
// size, times and inode did not move since this host's last snapshot of the run is not
// read again: every tier lists its workspace (a host directory walked, the virtual tier's
// write generations, one find and stat in a container); a container whose workspace cannot
// be listed unambiguously is read whole through its archive, and only new contents are
// uploaded.

// snapshotTools are the built-in tools after which a run's workspace is snapshotted.
func snapshotTool(tool string) bool { return tool == agents.ToolWriteFile || tool == agents.ToolShell }

// maxSnapshotFile bounds one file a snapshot holds in memory while it stores it.
const maxSnapshotFile = 256 << 20

// racyWindow: a file changed this close before the last listing may have changed again in
// the same clock tick of the file system (coarse timestamps), so it is hashed again.
const racyWindow = 20 * time.Millisecond

// snapState is what this host knows of a run's workspace since its last snapshot here.
type snapState struct {
	mu     sync.Mutex
	files  map[string]snapFile
	listed int64 // unix nanos the last listing started
	// stored: blob sums this host stored for the run, and when. Past
	// artifacts.FreshenAfter a sum is put again (which freshens the blob), since the
	// collector (starter store gc) spares a blob by its age when a reference to it is not
	// in history yet.
	stored map[string]time.Time
	// uploaded counts the bytes of file contents the snapshot being taken stored anew.
	uploaded int64
}

type snapFile struct {
	size, mod, ctime int64
	ino, sum         string
}

// snapStateOf returns the run's snapshot state on this host, made on first use; it is
// dropped with the run's sandbox (Release, Forget, a move).
func (s *Sandboxes) snapStateOf(runID string, spec api.SandboxSpec) *snapState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snaps == nil {
		s.snaps = map[string]*snapState{}
	}
	key := liveKey(runID, spec)
	st := s.snaps[key]
	if st == nil {
		st = &snapState{files: map[string]snapFile{}, stored: map[string]time.Time{}}
		s.snaps[key] = st
	}
	return st
}

// dropSnapState forgets what this host knew of the run's snapshots (its sandbox here is
// gone or made anew).
func (s *Sandboxes) dropSnapState(key string) {
	s.mu.Lock()
	delete(s.snaps, key)
	s.mu.Unlock()
}

// snapshotEligible: the run's own workspaces are snapshotted; a user's dir only when the
// agent asks (sandbox.snapshot).
func snapshotEligible(spec api.SandboxSpec) bool { return spec.Dir == "" || spec.Snapshot }

// snapshotAfter snapshots the run's workspace after a tool call. A workspace over the
// snapshot limits is not an activity failure: the call's result stands, and SnapshotError
// says why there is no snapshot (the workflow records it).
// listed, when not nil, is the workspace as the call's own round trip listed it after
// the command (Tools.shell): the snapshot starts from it instead of listing again.
func (a *Host) snapshotAfter(ctx context.Context, req api.RunToolRequest, sb sandbox.Sandbox, listed *preListing) (*api.SnapshotRef, string, error) {
	if !snapshotEligible(req.Sandbox) {
		return nil, "", nil
	}
	ref, err := a.snapshotListed(ctx, req.RunID, req.Sandbox, sb, listed)
	if errors.Is(err, sandbox.ErrArchiveTooLarge) {
		return nil, err.Error(), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("snapshot the workspace after %s call %s: %w", req.Tool, req.CallID, err)
	}
	return &ref, "", nil
}

// snapshotWorkspace stores a snapshot of sb, the sandbox of the run.
func (a *Host) snapshotWorkspace(ctx context.Context, runID string, spec api.SandboxSpec, sb sandbox.Sandbox) (api.SnapshotRef, error) {
	return a.snapshotListed(ctx, runID, spec, sb, nil)
}

// snapshotListed is snapshotWorkspace starting from a listing already taken (nil: list).
// The snapshot's time is then when that listing was asked for, before it began: a file
// changed in between is inside the racy window next time and read again.
func (a *Host) snapshotListed(ctx context.Context, runID string, spec api.SandboxSpec, sb sandbox.Sandbox, listed *preListing) (api.SnapshotRef, error) {
	st := a.sandboxes.snapStateOf(runID, spec)
	st.mu.Lock()
	defer st.mu.Unlock()
	started := time.Now()
	var pre []sandbox.WorkspaceEntry
	if listed != nil {
		started, pre = listed.at, listed.entries
	}
	st.uploaded = 0
	var (
		m   api.Manifest
		err error
	)
	l, listable := sb.(sandbox.Lister)
	ws, archivable := sb.(workspacer)
	switch {
	case listable:
		var entries []sandbox.WorkspaceEntry
		m, entries, err = a.manifestFromListing(ctx, st, l, pre)
		if errors.Is(err, sandbox.ErrListingUnsupported) && archivable {
			// See the Docker tier's listing, and OpenLimiter. The listing's stamps, taken
			// before the archive's bytes, go with the archive's sums: a file that changed
			// in between has a stamp that moved (or is inside the racy window) next time.
			st.files = map[string]snapFile{}
			m, err = a.manifestFromArchive(ctx, st, ws)
			if err == nil {
				st.files = stampsOf(entries, m)
			}
		}
	case archivable:
		m, err = a.manifestFromArchive(ctx, st, ws)
	default:
		return api.SnapshotRef{}, fmt.Errorf("this %s sandbox cannot be snapshotted", spec.Type)
	}
	if err != nil {
		return api.SnapshotRef{}, err
	}
	st.listed = started.UnixNano()
	ref := api.SnapshotRef{AtUnixNano: started.UnixNano()}
	for _, e := range m.Entries {
		if e.Type == api.EntryFile {
			ref.Files++
			ref.Bytes += e.Size
		}
	}
	stored := time.Now()
	body, err := json.Marshal(m)
	if err != nil {
		return api.SnapshotRef{}, fmt.Errorf("encode manifest: %w", err)
	}
	sum, err := a.store.PutBlob(ctx, body)
	if err != nil {
		return api.SnapshotRef{}, fmt.Errorf("store manifest: %w", err)
	}
	phaseSince(ctx, PhaseManifest, stored)
	ref.Manifest, ref.Uploaded = sum, st.uploaded
	return ref, nil
}

// storeFile puts data in the store unless this host knows it is there, and returns its sum.
func (a *Host) storeFile(ctx context.Context, st *snapState, data []byte) (string, error) {
	defer phaseSince(ctx, PhaseUpload, time.Now())
	sum := artifacts.Sum(data)
	if at, ok := st.stored[sum]; ok && time.Since(at) < artifacts.FreshenAfter {
		return sum, nil
	}
	if _, err := a.store.PutBlob(ctx, data); err != nil {
		return "", err
	}
	st.stored[sum] = time.Now()
	st.uploaded += int64(len(data))
	return sum, nil
}

// manifestFromListing lists a workspace (or takes entries, a listing already made) and
// hashes only what changed.
func (a *Host) manifestFromListing(ctx context.Context, st *snapState, l sandbox.Lister, entries []sandbox.WorkspaceEntry) (api.Manifest, []sandbox.WorkspaceEntry, error) {
	if entries == nil {
		listed := time.Now()
		var err error
		entries, err = l.ListWorkspace(ctx)
		phaseSince(ctx, PhaseList, listed)
		if err != nil {
			return api.Manifest{}, nil, err
		}
	}
	racy := st.listed - int64(racyWindow)
	unchanged := func(e sandbox.WorkspaceEntry) (snapFile, bool) {
		cur := snapFile{size: e.Size, mod: e.ModUnixNano, ctime: e.ChangeUnixNano, ino: e.Change}
		prev, ok := st.files[e.Path]
		if ok && cur.ino != "" && prev.size == cur.size && prev.mod == cur.mod && prev.ctime == cur.ctime &&
			prev.ino == cur.ino && max(cur.mod, cur.ctime) < racy {
			cur.sum = prev.sum
			return cur, true
		}
		return cur, false
	}
	if lim, ok := l.(sandbox.OpenLimiter); ok {
		changed := 0
		for _, e := range entries {
			if _, same := unchanged(e); e.Type == api.EntryFile && !same {
				changed++
			}
		}
		if changed > lim.OpenLimit() {
			return api.Manifest{}, entries, fmt.Errorf("%w: %d files changed, more than the %d read one by one", sandbox.ErrListingUnsupported, changed, lim.OpenLimit())
		}
	}
	m := api.Manifest{Version: api.ManifestVersion, Entries: make([]api.ManifestEntry, 0, len(entries))}
	files := make(map[string]snapFile, len(entries))
	var total int64
	for _, e := range entries {
		me := api.ManifestEntry{Path: e.Path, Type: e.Type, Mode: uint32(e.Mode), ModUnixNano: e.ModUnixNano, Link: e.Link}
		if e.Type == api.EntryFile {
			total += e.Size
			if total > sandbox.MaxWorkspaceArchive {
				return api.Manifest{}, nil, fmt.Errorf("%w: more than %d bytes of files", sandbox.ErrArchiveTooLarge, sandbox.MaxWorkspaceArchive)
			}
			cur, same := unchanged(e)
			if !same {
				sum, err := a.hashListed(ctx, st, l, e)
				if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrNotRegular) {
					continue // removed or replaced while listing: the next snapshot sees it
				}
				if err != nil {
					return api.Manifest{}, nil, err
				}
				cur.sum = sum
			}
			me.Size, me.SHA256 = e.Size, cur.sum
			files[e.Path] = cur
		}
		m.Entries = append(m.Entries, me)
	}
	st.files = files
	return m, entries, nil
}

// stampsOf pairs a listing's stamps with the sums a manifest of the same workspace found.
func stampsOf(entries []sandbox.WorkspaceEntry, m api.Manifest) map[string]snapFile {
	sums := make(map[string]api.ManifestEntry, len(m.Entries))
	for _, me := range m.Entries {
		sums[me.Path] = me
	}
	files := make(map[string]snapFile, len(entries))
	for _, e := range entries {
		if me, ok := sums[e.Path]; ok && e.Type == api.EntryFile && me.Type == api.EntryFile && me.Size == e.Size {
			files[e.Path] = snapFile{size: e.Size, mod: e.ModUnixNano, ctime: e.ChangeUnixNano, ino: e.Change, sum: me.SHA256}
		}
	}
	return files
}

func (a *Host) hashListed(ctx context.Context, st *snapState, l sandbox.Lister, e sandbox.WorkspaceEntry) (string, error) {
	if e.Size > maxSnapshotFile {
		return "", fmt.Errorf("%w: %s holds %d bytes, over the %d a snapshot keeps of one file", sandbox.ErrArchiveTooLarge, e.Path, e.Size, maxSnapshotFile)
	}
	read := time.Now()
	f, err := l.OpenWorkspaceFile(ctx, e.Path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSnapshotFile+1))
	phaseSince(ctx, PhaseRead, read)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", e.Path, err)
	}
	if len(data) > maxSnapshotFile {
		return "", fmt.Errorf("%w: %s grew over the %d bytes a snapshot keeps of one file", sandbox.ErrArchiveTooLarge, e.Path, maxSnapshotFile)
	}
	return a.storeFile(ctx, st, data)
}

// manifestFromArchive reads the workspace through its archive (virtual, docker).
func (a *Host) manifestFromArchive(ctx context.Context, st *snapState, ws workspacer) (api.Manifest, error) {
	rc, err := ws.ArchiveWorkspace(ctx)
	if err != nil {
		return api.Manifest{}, err
	}
	defer rc.Close()
	m := api.Manifest{Version: api.ManifestVersion}
	tr := tar.NewReader(rc)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return api.Manifest{}, fmt.Errorf("read workspace archive: %w", err)
		}
		rel := path.Clean(strings.TrimPrefix(strings.TrimPrefix(hdr.Name, "./"), "/"))
		if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		me := api.ManifestEntry{Path: rel, Mode: uint32(fs.FileMode(hdr.Mode).Perm()), ModUnixNano: hdr.ModTime.UnixNano()}
		switch hdr.Typeflag {
		case tar.TypeDir:
			me.Type = api.EntryDir
		case tar.TypeSymlink:
			me.Type, me.Link = api.EntryLink, hdr.Linkname
		case tar.TypeReg:
			total += hdr.Size
			if total > sandbox.MaxWorkspaceArchive {
				return api.Manifest{}, fmt.Errorf("%w: more than %d bytes of files", sandbox.ErrArchiveTooLarge, sandbox.MaxWorkspaceArchive)
			}
			if hdr.Size > maxSnapshotFile {
				return api.Manifest{}, fmt.Errorf("%w: %s holds %d bytes, over the %d a snapshot keeps of one file", sandbox.ErrArchiveTooLarge, rel, hdr.Size, maxSnapshotFile)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return api.Manifest{}, fmt.Errorf("read %s from the workspace archive: %w", rel, err)
			}
			sum, err := a.storeFile(ctx, st, data)
			if err != nil {
				return api.Manifest{}, err
			}
			me.Type, me.Size, me.SHA256 = api.EntryFile, int64(len(data)), sum
		default:
			continue
		}
		m.Entries = append(m.Entries, me)
	}
	sort.Slice(m.Entries, func(i, j int) bool { return m.Entries[i].Path < m.Entries[j].Path })
	return m, nil
}

// LoadManifest reads and checks a stored manifest.
func LoadManifest(ctx context.Context, blobs artifacts.Blobs, ref string) (api.Manifest, error) {
	if !artifacts.ValidSum(ref) {
		return api.Manifest{}, fmt.Errorf("workspace snapshot %q: not a sha256 name", ref)
	}
	body, err := blobs.GetBlob(ctx, ref)
	if err != nil {
		return api.Manifest{}, fmt.Errorf("workspace snapshot %s: %w", ref, err)
	}
	var m api.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return api.Manifest{}, fmt.Errorf("workspace snapshot %s: decode manifest: %w", ref, err)
	}
	if m.Version != api.ManifestVersion {
		return api.Manifest{}, fmt.Errorf("workspace snapshot %s: manifest version %d, this worker reads %d", ref, m.Version, api.ManifestVersion)
	}
	return m, nil
}

// restoreManifest rebuilds the workspace of ws from the snapshot ref: every directory and
// file it lists, checked against its sha256. A file whose blob is missing or changed is
// left out and named in Lost; links the tier does not restore are named in Skipped. It
// returns the bytes of files restored.
func (a *Host) restoreManifest(ctx context.Context, ws workspacer, ref string, keepLinks bool) (api.RestoreManifestResult, int64, error) {
	m, err := LoadManifest(ctx, a.store, ref)
	if err != nil {
		return api.RestoreManifestResult{}, 0, err
	}
	var res api.RestoreManifestResult
	var n int64
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var werr error
		for _, e := range m.Entries {
			if werr = ctx.Err(); werr != nil {
				break
			}
			hdr := &tar.Header{Name: "./" + e.Path, Mode: int64(e.Mode), ModTime: time.Unix(0, e.ModUnixNano)}
			switch e.Type {
			case api.EntryDir:
				hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
				werr = tw.WriteHeader(hdr)
			case api.EntryLink:
				if !keepLinks {
					res.Skipped = append(res.Skipped, e.Path+" -> "+e.Link)
					continue
				}
				hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
				werr = tw.WriteHeader(hdr)
			case api.EntryFile:
				data, err := a.store.GetBlob(ctx, e.SHA256)
				if err != nil {
					if errors.Is(err, artifacts.ErrNotFound) || errors.Is(err, artifacts.ErrChecksum) {
						res.Lost = append(res.Lost, e.Path)
						continue
					}
					werr = err
					break
				}
				hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
				if werr = tw.WriteHeader(hdr); werr == nil {
					_, werr = tw.Write(data)
					n += int64(len(data))
				}
			}
			if werr != nil {
				break
			}
		}
		if werr == nil {
			werr = tw.Close()
		}
		pw.CloseWithError(werr)
	}()
	if err := ws.RestoreWorkspace(ctx, pr); err != nil {
		pr.CloseWithError(err)
		return api.RestoreManifestResult{}, 0, err
	}
	return res, n, nil
}

// nonRetryableSnapshot marks a snapshot that can never be read as final.
func nonRetryableSnapshot(err error) error {
	if errors.Is(err, artifacts.ErrChecksum) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s workspace snapshot do not match their sha256: %v (restore the blob from a backup of the store; `starter store verify` lists every changed blob)", api.StoreCorruptLead, err),
			api.ErrTypeStoreCorrupt, err)
	}
	if errors.Is(err, artifacts.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, err)
	}
	return err
}

// restoreBase rebuilds sb, made anew on this host, from the run's snapshot ref.
func (a *Host) restoreBase(ctx context.Context, sb sandbox.Sandbox, spec api.SandboxSpec, ref string) (api.RestoreManifestResult, error) {
	ws, ok := sb.(workspacer)
	if !ok {
		return api.RestoreManifestResult{}, fmt.Errorf("this %s sandbox cannot be restored", specType(spec))
	}
	res, _, err := a.restoreManifest(ctx, ws, ref, spec.Type == api.SandboxDocker)
	return res, nonRetryableSnapshot(err)
}
