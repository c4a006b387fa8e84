package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/moby/moby/client"
)

// ReapMoved removes the containers this Manager's worker created (labelled with its worker
// id and scope) whose run moved to another host, and returns their names. moved answers
// for one run id. A run that moves gets a fresh container on its new host (labelled with
// that host's id), so two workers sharing one Docker engine never remove each other's.
func (m *Manager) ReapMoved(ctx context.Context, moved func(runID string) (bool, error)) ([]string, error) {
	f := make(client.Filters).Add("label", LabelManaged+"=true", LabelWorker+"="+m.worker)
	if m.scope != "" {
		f.Add("label", LabelScope+"="+m.scope)
	}
	res, err := m.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("reap moved sandboxes: list containers: %w", err)
	}
	var removed []string
	var errs []error
	for _, c := range res.Items {
		runID, _ := runOfContainer(c.Labels, c.Names)
		if runID == "" {
			continue
		}
		gone, err := moved(runID)
		if err != nil || !gone {
			continue
		}
		name := shortID(c.ID)
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		m.mu.Lock()
		if p := m.pools[c.ID]; p != nil {
			p.close()
			delete(m.pools, c.ID)
		}
		m.mu.Unlock()
		if err := removeContainer(ctx, m.cli, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("container %s of run %s: %w", name, runID, err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
