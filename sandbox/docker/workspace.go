package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/client"
)

// ArchiveWorkspace streams the whole workspace as a tar archive: every file, directory and
// symbolic link under Workdir with its mode, owner and times, named relative to the
// workspace ("./", "./src/main.go"). The caller closes the reader; the container is
// untouched, so archive it before removing it (a suspended run's idle timeout). Commands
// still writing while it streams may or may not be captured.
func (s *Sandbox) ArchiveWorkspace(ctx context.Context) (io.ReadCloser, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("archive workspace of %s: %w", s.name, err)
	}
	// "dir/." archives the directory's content under "./" instead of under its name.
	res, err := s.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: s.set.workdir + "/."})
	if err != nil {
		return nil, fmt.Errorf("archive workspace of %s: %w", s.name, s.apiError(err))
	}
	return res.Content, nil
}

// RestoreWorkspace extracts an archive made by ArchiveWorkspace into the workspace, keeping
// the modes, owners and times it records: meant for the fresh container of a run whose
// workspace was archived, so the agent finds exactly the files it left. Entries that would
// land outside the workspace are refused by the Docker daemon. Existing files with the
// same names are replaced; others are kept, so restore into a fresh container.
func (s *Sandbox) RestoreWorkspace(ctx context.Context, archive io.Reader) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("restore workspace of %s: %w", s.name, err)
	}
	_, err := s.cli.CopyToContainer(ctx, s.id, client.CopyToContainerOptions{DestinationPath: s.set.workdir, Content: archive})
	if err != nil {
		return fmt.Errorf("restore workspace of %s: %w", s.name, s.apiError(err))
	}
	return nil
}
