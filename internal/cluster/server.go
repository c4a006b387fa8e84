package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nexo-temporal/nexo/api"
)

// Databases the server uses in the PostgreSQL server.
const (
	dbTemporal   = "temporal"
	dbVisibility = "temporal_visibility"
)

// setupSchema creates both databases and brings their schema to the module's latest version
// with temporal-sql-tool, as an operator deploying the server on PostgreSQL does.
func setupSchema(ctx context.Context, bins Binaries, pg *postgres, logs string) error {
	for _, db := range []struct{ name, schema string }{
		{dbTemporal, filepath.Join(bins.SchemaDir, "temporal", "versioned")},
		{dbVisibility, filepath.Join(bins.SchemaDir, "visibility", "versioned")},
	} {
		base := []string{"--plugin", "postgres12", "--endpoint", "127.0.0.1", "--port", strconv.Itoa(pg.port),
			"--user", "postgres", "--database", db.name}
		for _, args := range [][]string{
			{"create-database"},
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "-d", db.schema},
		} {
			cmd := exec.CommandContext(ctx, bins.SQLTool, append(append([]string{}, base...), args...)...)
			out, err := cmd.CombinedOutput()
			_ = os.WriteFile(filepath.Join(logs, "sql-tool-"+db.name+"-"+args[0]+".log"), out, 0o644)
			if err != nil {
				return fmt.Errorf("temporal-sql-tool %s (%s): %w\n%s", args[0], db.name, err, out)
			}
		}
	}
	return nil
}

// serverPorts are the server's ports: gRPC and membership per service, plus frontend HTTP.
type serverPorts struct {
	Frontend, FrontendMembership, FrontendHTTP int
	History, HistoryMembership                 int
	Matching, MatchingMembership               int
	Worker, WorkerMembership                   int
}

func pickServerPorts() (serverPorts, error) {
	var ps serverPorts
	for _, p := range []*int{&ps.Frontend, &ps.FrontendHTTP, &ps.History, &ps.Matching, &ps.Worker} {
		n, err := FreePort()
		if err != nil {
			return ps, err
		}
		*p = n
	}
	// The cluster_membership table stores a member's port as a smallint: membership ports
	// must be below 32768, which the kernel's ephemeral range (from 32768) never gives.
	for _, p := range []*int{&ps.FrontendMembership, &ps.HistoryMembership, &ps.MatchingMembership, &ps.WorkerMembership} {
		n, err := freeLowPort()
		if err != nil {
			return ps, err
		}
		*p = n
	}
	return ps, nil
}

type serverConfig struct {
	serverPorts
	PGPort      int
	Dir         string
	DynamicFile string
	TLS         *TLSFiles
	// AllInterfaces binds the frontend on 0.0.0.0 (membership still broadcasts 127.0.0.1).
	AllInterfaces bool
}

// serverConfigTemplate is config/development-postgres12.yaml of the server module with free
// ports, no archival, and (with TLS) mutual TLS on the frontend.
var serverConfigTemplate = template.Must(template.New("server").Parse(`log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: 4
  datastores:
    postgres-default:
      sql:
        pluginName: "postgres12"
        databaseName: "` + dbTemporal + `"
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: "tcp"
        user: "postgres"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: "1h"
    postgres-visibility:
      sql:
        pluginName: "postgres12"
        databaseName: "` + dbVisibility + `"
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: "tcp"
        user: "postgres"
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: "1h"
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
{{- if .TLS}}
  tls:
    frontend:
      server:
        certFile: "{{.TLS.ServerCert}}"
        keyFile: "{{.TLS.ServerKey}}"
        requireClientAuth: true
        clientCaFiles: ["{{.TLS.CA}}"]
      client:
        serverName: "{{.TLS.ServerName}}"
        rootCaFiles: ["{{.TLS.CA}}"]
    systemWorker:
      certFile: "{{.TLS.ClientCert}}"
      keyFile: "{{.TLS.ClientKey}}"
      client:
        serverName: "{{.TLS.ServerName}}"
        rootCaFiles: ["{{.TLS.CA}}"]
{{- end}}
services:
  frontend:
    rpc:
      grpcPort: {{.Frontend}}
      membershipPort: {{.FrontendMembership}}
{{- if .AllInterfaces}}
      bindOnIP: "0.0.0.0"
{{- else}}
      bindOnLocalHost: true
{{- end}}
      httpPort: {{.FrontendHTTP}}
  matching:
    rpc:
      grpcPort: {{.Matching}}
      membershipPort: {{.MatchingMembership}}
      bindOnLocalHost: true
  history:
    rpc:
      grpcPort: {{.History}}
      membershipPort: {{.HistoryMembership}}
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: {{.Worker}}
      membershipPort: {{.WorkerMembership}}
      bindOnLocalHost: true
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "127.0.0.1:{{.Frontend}}"
dcRedirectionPolicy:
  policy: "noop"
dynamicConfigClient:
  filepath: "{{.DynamicFile}}"
  pollInterval: "10s"
`))

// dynamicConfig is the cluster's dynamic config: Temporal's defaults, but for the history
// queues' poll rates (20/s per shard by default, which caps a small cluster at a few
// activities per second per shard, see devserver/config.go) and the long-poll interval.
const dynamicConfig = `history.transferProcessorMaxPollRPS:
  - value: 2000
history.transferProcessorMaxPollHostRPS:
  - value: 2000
history.timerProcessorMaxPollRPS:
  - value: 2000
history.timerProcessorMaxPollHostRPS:
  - value: 2000
history.visibilityProcessorMaxPollRPS:
  - value: 2000
history.visibilityProcessorMaxPollHostRPS:
  - value: 2000
history.longPollExpirationInterval:
  - value: 2s
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
frontend.rps:
  - value: 5000
frontend.namespaceRPS:
  - value: 5000
frontend.namespaceRPS.visibility:
  - value: 500
`

// writeServerConfig writes the server's config and dynamic config under dir.
func writeServerConfig(dir string, cfg serverConfig) (string, error) {
	cfg.DynamicFile = filepath.Join(dir, "dynamicconfig.yaml")
	if err := os.WriteFile(cfg.DynamicFile, []byte(dynamicConfig), 0o644); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := serverConfigTemplate.Execute(&b, cfg); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "server.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// ensureNamespace registers namespace (when absent) and Nexo's search attributes, and waits
// until the frontend serves both: the worker refuses to start without them.
func ensureNamespace(ctx context.Context, opts client.Options) error {
	var c client.Client
	var err error
	for {
		c, err = client.DialContext(ctx, opts)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dial the frontend %s: %w", opts.HostPort, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	defer c.Close()
	ns := opts.Namespace
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	if _, exists := err.(*serviceerror.NamespaceAlreadyExists); err != nil && !exists {
		return fmt.Errorf("register namespace %s: %w", ns, err)
	}
	want := map[string]enumspb.IndexedValueType{}
	for _, name := range api.SearchAttributes {
		want[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	for {
		_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: ns, SearchAttributes: want})
		if err == nil {
			break
		}
		if _, exists := err.(*serviceerror.AlreadyExists); exists {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("add search attributes to namespace %s: %w", ns, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	for {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err == nil {
			missing := 0
			for name := range want {
				if _, ok := resp.GetCustomAttributes()[name]; !ok {
					missing++
				}
			}
			if missing == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes of namespace %s not served: %v", ns, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
