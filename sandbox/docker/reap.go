package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Reap removes the platform's containers (labelled nexo.managed=true) whose run is closed
// or unknown, with their workspace volumes, and returns the names of the containers it
// removed. isClosed answers for one run id (the worker asks Temporal); it should report an
// unknown run as closed. A container without a run label is an orphan and goes too.
//
// Reap is what keeps a worker killed mid-run from leaking containers: call it at worker
// start and periodically. It also removes workspace volumes of the platform that no
// container uses any more (left by a `docker rm` without -v). It goes on past a failure
// for one container and returns the failures joined.
func Reap(ctx context.Context, cli Client, isClosed func(runID string) (bool, error)) (removed []string, err error) {
	return ReapScope(ctx, cli, "", isClosed)
}

// ReapScope is Reap limited to the containers labelled with scope (see LabelScope); an
// empty scope means every container of the platform.
func ReapScope(ctx context.Context, cli Client, scope string, isClosed func(runID string) (bool, error)) (removed []string, err error) {
	f := make(client.Filters).Add("label", LabelManaged+"=true")
	if scope != "" {
		f.Add("label", LabelScope+"="+scope)
	}
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("reap sandboxes: list containers: %w", err)
	}
	var errs []error
	closed := map[string]bool{} // several containers of one run (hand-made) ask once
	for _, c := range res.Items {
		name := shortID(c.ID)
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		runID, unclaimed := runOfContainer(c.Labels, c.Names)
		if unclaimed {
			continue // a warm pool's, which ReapWarm decides on
		}
		if runID != "" {
			done, ok := closed[runID]
			if !ok {
				var err error
				done, err = isClosed(runID)
				if err != nil {
					errs = append(errs, fmt.Errorf("container %s: is run %s closed: %w", name, runID, err))
					continue
				}
				closed[runID] = done
			}
			if !done {
				continue
			}
		}
		if err := removeContainer(ctx, cli, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("container %s of run %q: %w", name, runID, err))
			continue
		}
		removed = append(removed, name)
	}
	if err := reapVolumes(ctx, cli); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("reap sandboxes: %w", err)
	}
	return removed, nil
}

// reapVolumes removes the platform's workspace volumes that no container uses.
func reapVolumes(ctx context.Context, cli Client) error {
	vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).
		Add("label", LabelManaged+"=true").Add("dangling", "true")})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	var errs []error
	for _, v := range vols.Items {
		// Not forced: a volume a container took up meanwhile is in use and stays.
		if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", shortID(v.Name), err))
		}
	}
	return errors.Join(errs...)
}
