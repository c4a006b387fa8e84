package artifacts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// VerifyProgress is how far a Verify has come, for a progress line.
type VerifyProgress struct {
	Done, Total int   // objects
	Bytes       int64 // read so far
}

// VerifyOptions tune a Verify.
type VerifyOptions struct {
	// Progress, when set, is called after every object read.
	Progress func(VerifyProgress)
}

// VerifyProblem is one blob or run artifact whose bytes are not what names them.
type VerifyProblem struct {
	// Kind is "mismatch" (the bytes hash to another sha256) or "missing" (a snapshot
	// manifest names a blob the store does not hold).
	Kind string `json:"kind"`
	// Key is the object: blobs/<sha256> or <run>/<name>.
	Key string `json:"key"`
	// SHA256 is the sha256 the object should have: a blob's name, or the one the run's
	// stored record gives a run artifact.
	SHA256 string `json:"sha256"`
	// Got is what the bytes hash to (mismatch only).
	Got string `json:"got,omitempty"`
	// NamedBy lists the snapshot manifests that name a missing or changed file blob.
	NamedBy []string `json:"named_by,omitempty"`
	// Runs are the runs whose stored records reference the object (directly or through a
	// snapshot manifest): the runs the store knows need it. Open runs keep their
	// references in Temporal's history, not in the store, so they may be missing here.
	Runs []string `json:"runs"`
}

// VerifyReport is what a Verify found.
type VerifyReport struct {
	Blobs     int             `json:"blobs"`
	Artifacts int             `json:"artifacts"`
	Bytes     int64           `json:"bytes"`
	Problems  []VerifyProblem `json:"problems"`
}

// Verify rehashes every blob and run artifact of the store. A blob must hash to its
// name; a run artifact to the sha256 its run's stored record gives it (one with no stored
// record, an open run's, is read but has nothing to be checked against). A file blob that
// a snapshot manifest names but the store lacks is missing. Each problem names the runs
// whose stored records reference it.
//
// Memory is bounded: objects are streamed through the hash, and only manifests and
// records (at most maxParsedBlob each) are decoded whole; what is kept is the listing and
// the references of the blobs found bad. Safe against a live store: it only reads, an
// object removed after the listing (store gc) is skipped, and one written after it is not
// seen (a write in flight is a temp file, not a blob name).
func (s *Bucket) Verify(ctx context.Context, o VerifyOptions) (VerifyReport, error) {
	rep := VerifyReport{Problems: []VerifyProblem{}}
	blobs, arts, err := s.listObjects(ctx, "verify")
	if err != nil {
		return rep, err
	}
	sizes := make(map[string]int64, len(blobs))
	for _, so := range blobs {
		sizes[strings.TrimPrefix(so.key, blobPrefix+"/")] = so.size
	}
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].key < blobs[j].key })
	sort.Slice(arts, func(i, j int) bool { return arts[i].key < arts[j].key })
	total := len(blobs) + len(arts)
	done := 0
	progress := func(n int64) {
		done++
		rep.Bytes += n
		if o.Progress != nil {
			o.Progress(VerifyProgress{Done: done, Total: total, Bytes: rep.Bytes})
		}
	}

	bad := map[string]*VerifyProblem{} // by the sha256 it should have
	var records []string               // blobs that are stored records
	recArts := map[string]map[string]string{}
	manifests := map[string][]string{} // manifest -> bad file blobs it names
	for _, so := range blobs {
		sum := strings.TrimPrefix(so.key, blobPrefix+"/")
		got, body, err := s.hashBlob(ctx, so)
		if notFound(err) {
			progress(0)
			continue // removed since the listing
		}
		if err != nil {
			return rep, fmt.Errorf("verify %s: read blob %s: %w", s.url, sum, err)
		}
		progress(so.size)
		rep.Blobs++
		if got != sum {
			bad[sum] = &VerifyProblem{Kind: "mismatch", Key: so.key, SHA256: sum, Got: got}
			continue
		}
		if body == nil {
			continue
		}
		if bytes.HasPrefix(body, []byte(recordHead)) {
			var rec api.Record
			if json.Unmarshal(body, &rec) == nil && rec.ID != "" && rec.Workflow != "" {
				records = append(records, sum)
				for _, a := range rec.Artifacts {
					if recArts[rec.ID] == nil {
						recArts[rec.ID] = map[string]string{}
					}
					recArts[rec.ID][a.Name] = a.SHA256
				}
			}
			continue
		}
		var m api.Manifest
		if json.Unmarshal(body, &m) == nil && m.Version > 0 {
			for _, e := range m.Entries {
				if e.Type != api.EntryFile {
					continue
				}
				if _, ok := sizes[e.SHA256]; !ok {
					p := bad[e.SHA256]
					if p == nil {
						p = &VerifyProblem{Kind: "missing", Key: blobKey(e.SHA256), SHA256: e.SHA256}
						bad[e.SHA256] = p
					}
					p.NamedBy = append(p.NamedBy, sum+" ("+e.Path+")")
					manifests[sum] = append(manifests[sum], e.SHA256)
				} else {
					manifests[sum] = append(manifests[sum], e.SHA256) // checked below once all are hashed
				}
			}
		}
	}
	// A manifest's entries were hashed after or before it: now every bad blob is known.
	for m, files := range manifests {
		keep := files[:0]
		for _, f := range files {
			if p := bad[f]; p != nil {
				keep = append(keep, f)
				if p.Kind == "mismatch" {
					p.NamedBy = append(p.NamedBy, m)
				}
			}
		}
		if len(keep) == 0 {
			delete(manifests, m)
		} else {
			manifests[m] = keep
		}
	}

	for _, so := range arts {
		run, name, _ := strings.Cut(so.key, "/")
		h := sha256.New()
		n, err := s.copyObject(ctx, so.key, h)
		if notFound(err) {
			progress(0)
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("verify %s: read %s: %w", s.url, so.key, err)
		}
		progress(n)
		rep.Artifacts++
		want, ok := recArts[run][name]
		if got := hex.EncodeToString(h.Sum(nil)); ok && want != "" && got != want {
			rep.Problems = append(rep.Problems, VerifyProblem{Kind: "mismatch", Key: so.key, SHA256: want, Got: got, Runs: []string{run}})
		}
	}

	// Which runs need the bad blobs: the stored records that name them, or name a
	// manifest that does. Only the records are read again, only when something is bad.
	if len(bad) > 0 {
		for _, sum := range records {
			body, err := s.b.ReadAll(ctx, blobKey(sum))
			if notFound(err) {
				continue
			}
			if err != nil {
				return rep, fmt.Errorf("verify %s: read record %s: %w", s.url, sum, err)
			}
			var rec struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(body, &rec)
			sc := refScanner{found: func(ref string) {
				if p := bad[ref]; p != nil {
					p.Runs = appendOnce(p.Runs, rec.ID)
				}
				for _, f := range manifests[ref] {
					bad[f].Runs = appendOnce(bad[f].Runs, rec.ID)
				}
			}}
			_, _ = sc.Write(body)
			sc.flush()
		}
	}
	for _, p := range bad {
		if p.Runs == nil {
			p.Runs = []string{}
		}
		sort.Strings(p.Runs)
		sort.Strings(p.NamedBy)
		rep.Problems = append(rep.Problems, *p)
	}
	sort.Slice(rep.Problems, func(i, j int) bool { return rep.Problems[i].Key < rep.Problems[j].Key })
	return rep, nil
}

// hashBlob streams blob so through sha256 and returns what it hashes to, with its bytes
// when it may be a record or a manifest (it starts like one and is at most maxParsedBlob).
func (s *Bucket) hashBlob(ctx context.Context, so storeObject) (string, []byte, error) {
	r, err := s.b.NewReader(ctx, so.key, nil)
	if err != nil {
		return "", nil, err
	}
	defer r.Close()
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(recordHead))
	if so.size <= maxParsedBlob && (bytes.HasPrefix(head, []byte(recordHead)) || bytes.HasPrefix(head, []byte(`{"v":`))) {
		body, err := io.ReadAll(br)
		if err != nil {
			return "", nil, err
		}
		return Sum(body), body, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, br); err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(h.Sum(nil)), nil, nil
}

// copyObject streams object key into w.
func (s *Bucket) copyObject(ctx context.Context, key string, w io.Writer) (int64, error) {
	r, err := s.b.NewReader(ctx, key, nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return io.Copy(w, r)
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
