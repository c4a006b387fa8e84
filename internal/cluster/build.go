package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// serverModule is the module the dev server embeds and the cluster's server is built from.
const serverModule = "go.temporal.io/server"

// Binaries are the official Temporal server and its SQL schema tool, built from the module
// graph of the repository (the go.temporal.io/server version go.mod requires).
type Binaries struct {
	// Server is temporal-server (go.temporal.io/server/cmd/server).
	Server string
	// SQLTool is temporal-sql-tool (go.temporal.io/server/cmd/tools/sql).
	SQLTool string
	// Version is the server module's version, e.g. v1.32.2.
	Version string
	// SchemaDir is the module's schema/postgresql/v12 directory.
	SchemaDir string
}

// BuildServer builds temporal-server and temporal-sql-tool once per server version into a
// cache directory (os.UserCacheDir()/nexo-cluster/<version>) and returns their paths. repoDir
// is any directory inside the Nexo module: both are built in its module graph (go.mod lists
// them as tools), so they are the go.temporal.io/server version the dev server embeds and
// share its compiled packages in the Go build cache.
func BuildServer(ctx context.Context, repoDir string) (Binaries, error) {
	var b Binaries
	list := exec.CommandContext(ctx, "go", "list", "-m", "-json", serverModule)
	list.Dir = repoDir
	out, err := list.Output()
	if err != nil {
		return b, fmt.Errorf("find %s in the module graph of %s: %w%s", serverModule, repoDir, err, stderrOf(err))
	}
	var mod struct{ Version, Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return b, fmt.Errorf("go list -m -json %s: %w", serverModule, err)
	}
	if mod.Dir == "" {
		dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", serverModule+"@"+mod.Version)
		dl.Dir = repoDir
		out, err := dl.Output()
		if err != nil {
			return b, fmt.Errorf("download %s@%s: %w%s", serverModule, mod.Version, err, stderrOf(err))
		}
		if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
			return b, fmt.Errorf("go mod download %s@%s gave no directory (%v)", serverModule, mod.Version, err)
		}
	}
	b.Version = mod.Version
	b.SchemaDir = filepath.Join(mod.Dir, "schema", "postgresql", "v12")
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "nexo-cluster", mod.Version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, fmt.Errorf("binary cache: %w", err)
	}
	b.Server = filepath.Join(dir, "temporal-server")
	b.SQLTool = filepath.Join(dir, "temporal-sql-tool")
	for _, t := range []struct{ out, pkg string }{{b.Server, serverModule + "/cmd/server"}, {b.SQLTool, serverModule + "/cmd/tools/sql"}} {
		if _, err := os.Stat(t.out); err == nil {
			continue
		}
		// Build beside the target and rename: a concurrent build or an interrupted one never
		// leaves a half-written binary under the final name.
		tmp := fmt.Sprintf("%s.%d.tmp", t.out, os.Getpid())
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, t.pkg)
		cmd.Dir = repoDir
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.Remove(tmp)
			return b, fmt.Errorf("build %s@%s: %w\n%s", t.pkg, mod.Version, err, out)
		}
		if err := os.Rename(tmp, t.out); err != nil {
			return b, err
		}
	}
	return b, nil
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}
