package artifacts

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// segmentRange parses the name of an archived stream segment, stream-<from>-<to>.jsonl.
func segmentRange(name string) (from, to int64, ok bool) {
	rest, found := strings.CutPrefix(name, "stream-")
	if !found {
		return 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".jsonl")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	from, err1 := strconv.ParseInt(a, 10, 64)
	to, err2 := strconv.ParseInt(b, 10, 64)
	return from, to, err1 == nil && err2 == nil && from <= to
}

// SegmentError: an archived stream segment could not be read.
type SegmentError struct {
	Segment, RunID string
	Err            error
}

func (e *SegmentError) Error() string {
	return fmt.Sprintf("read archived stream segment %s of session %s: %v", e.Segment, e.RunID, e.Err)
}

func (e *SegmentError) Unwrap() error { return e.Err }

// StreamEvents returns the events with after < seq < before from the archived stream
// segments of a session's record (stream-<from>-<to>.jsonl artifacts, one per run that
// continued as new), in seq order and each once. Segments wholly outside the range are not
// read. Reply texts stored by reference come back whole (ResolveTexts, through st when it
// reads blobs too, as every Store does). On an error it returns the events read so far.
func StreamEvents(ctx context.Context, st Getter, rec api.Record, after, before int64) ([]api.Event, error) {
	type segment struct {
		from int64
		a    api.Artifact
	}
	var segs []segment
	for _, a := range rec.Artifacts {
		from, to, ok := segmentRange(a.Name)
		if ok && to > after && from < before {
			segs = append(segs, segment{from, a})
		}
	}
	slices.SortFunc(segs, func(x, y segment) int { return cmp.Compare(x.from, y.from) })
	var out []api.Event
	for _, sg := range segs {
		body, err := Read(ctx, st, rec.ID, sg.a)
		if err != nil {
			return out, &SegmentError{Segment: sg.a.Name, RunID: rec.ID, Err: err}
		}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, len(body)+1)
		for sc.Scan() {
			var ev api.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Seq <= after || ev.Seq >= before {
				continue
			}
			if n := len(out); n > 0 && ev.Seq <= out[n-1].Seq {
				continue
			}
			out = append(out, ev)
		}
	}
	bg, _ := st.(BlobGetter)
	resolved, err := ResolveTexts(ctx, bg, out)
	if err != nil {
		return resolved, fmt.Errorf("read archived stream of session %s: %w", rec.ID, err)
	}
	return resolved, nil
}
