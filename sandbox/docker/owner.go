package docker

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"github.com/moby/moby/client"
	"io"
	"strconv"
	"strings"
)

// owner returns the uid and gid the container's user has, for the files Write creates:
// the agent's shell runs as that user and must be able to change them. (Docker's own
// copyUIDGID resolves only user names, not "uid:gid".) The answer is kept per handle.
func (s *Sandbox) owner(ctx context.Context) (uid, gid int, err error) {
	s.ownerMu.Lock()
	defer s.ownerMu.Unlock()
	if s.ownerKnown {
		return s.uid, s.gid, nil
	}
	uid, gid, err = s.lookupOwner(ctx, s.set.user)
	if err != nil {
		return 0, 0, fmt.Errorf("find the uid of user %q: %w", s.set.user, err)
	}
	s.uid, s.gid, s.ownerKnown = uid, gid, true
	return uid, gid, nil
}

// lookupOwner resolves "", "uid", "uid:gid", "name" or "name:group" the way Docker does:
// numbers as they are, names in the container's /etc/passwd and /etc/group; a numeric
// uid without a group gets its passwd entry's group, else 0.
func (s *Sandbox) lookupOwner(ctx context.Context, user string) (uid, gid int, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	uid, uerr := strconv.Atoi(u)
	gid, gerr := strconv.Atoi(g)
	if uerr == nil && hasGroup && gerr == nil {
		return uid, gid, nil
	}
	passwd, err := s.readEtc(ctx, "/etc/passwd")
	if err != nil {
		return 0, 0, err
	}
	found := false
	for _, f := range passwd {
		if len(f) < 4 {
			continue
		}
		if (uerr != nil && f[0] == u) || (uerr == nil && f[2] == u) {
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
			found = true
			break
		}
	}
	if !found {
		if uerr != nil {
			return 0, 0, fmt.Errorf("no user %q in the container's /etc/passwd", u)
		}
		gid = 0
	}
	if !hasGroup {
		return uid, gid, nil
	}
	if gerr == nil {
		return uid, gid, nil
	}
	groups, err := s.readEtc(ctx, "/etc/group")
	if err != nil {
		return 0, 0, err
	}
	for _, f := range groups {
		if len(f) >= 3 && f[0] == g {
			gid, _ = strconv.Atoi(f[2])
			return uid, gid, nil
		}
	}
	return 0, 0, fmt.Errorf("no group %q in the container's /etc/group", g)
}

// readEtc reads a colon-separated file of the container (passwd, group) as fields.
func (s *Sandbox) readEtc(ctx context.Context, name string) ([][]string, error) {
	res, err := s.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: name})
	rc := res.Content
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, s.apiError(err))
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	var out [][]string
	sc := bufio.NewScanner(io.LimitReader(tr, 4<<20))
	for sc.Scan() {
		out = append(out, strings.Split(sc.Text(), ":"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}
