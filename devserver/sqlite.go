package devserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/serialization"
	sqlpersistence "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/common/searchattribute/sadefs"
	sqliteschema "go.temporal.io/server/schema/sqlite"
)

// SQLite connection attributes for a database file. The server's sqlite plugin (modernc.org
// driver) passes uri parameters (mode, cache, ...) through and turns every other attribute into
// a `PRAGMA key=value` run on each new connection.
//
//   - journal_mode=wal: a commit appends to the write-ahead log instead of rewriting pages
//     through a rollback journal: fewer writes and fsyncs per commit, and readers never block
//     the writer. The mode is persistent in the file.
//   - synchronous=normal: in WAL mode, fsync only at checkpoints, not on every commit. A commit
//     is in the OS page cache when it returns, so it survives the process being killed
//     (SIGKILL, panic, OOM); only a power loss or kernel crash may drop the last commits, and
//     even then the database stays consistent. That is the right trade for a dev server: the
//     default (full) costs an fsync per transaction, and the server commits several per
//     workflow step.
//   - busy_timeout=10000: wait up to 10 s for a lock held by another connection (a second
//     process on the same file, a `sqlite3` shell) instead of failing at once with
//     SQLITE_BUSY.
//
// The connection pool stays at the plugin's default of one connection (config.SQL.MaxConns 0).
// More connections would let reads run beside the writer under WAL, but the server runs
// read-then-write transactions that begin deferred, and a deferred transaction that must
// upgrade to a writer while another connection has committed fails with SQLITE_BUSY_SNAPSHOT
// regardless of busy_timeout; the plugin offers no way to begin them IMMEDIATE. One connection
// serialises statements that take microseconds each, which is not the bottleneck.
var fileConnectAttributes = map[string]string{
	"mode":         "rwc",
	"journal_mode": "wal",
	"synchronous":  "normal",
	"busy_timeout": "10000",
}

// sqlConfig returns the persistence config for opts.DBPath ("" = a private in-memory database).
func sqlConfig(dbPath string) *config.SQL {
	cfg := &config.SQL{PluginName: sqliteplugin.PluginName}
	if dbPath == "" {
		// The plugin sets up the schema itself for mode=memory. The shared cache lets every
		// service's connection see the same database; a random name keeps two servers in one
		// process (tests) apart.
		cfg.DatabaseName = "nexo-dev-" + strconv.FormatUint(rand.Uint64(), 36)
		cfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		return cfg
	}
	cfg.DatabaseName = dbPath
	cfg.ConnectAttributes = maps.Clone(fileConnectAttributes)
	return cfg
}

// prepareDBFile makes sure the database file at path exists and holds the Temporal schema:
// it creates the parent directory, and sets the schema up when the file is new (or empty).
// An existing database is left as it is, so runs survive a restart.
//
// The schema is created in one transaction on a private connection, so a crash halfway leaves
// an empty file that the next start sets up again, never a half-built schema.
func prepareDBFile(ctx context.Context, path string) error {
	if strings.ContainsAny(path, "?#") {
		// The plugin builds its DSN as "file:<path>?<attributes>" without escaping.
		return fmt.Errorf("check database path %q: must not contain '?' or '#'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}

	db, err := sql.Open("sqlite", fileDSN(path))
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	var tables, temporalTables int
	err = db.QueryRowContext(ctx,
		`SELECT count(*), count(CASE WHEN name = 'namespaces' THEN 1 END)
		 FROM sqlite_master WHERE type = 'table'`).Scan(&tables, &temporalTables)
	if err != nil {
		return fmt.Errorf("inspect database %s: %w", path, err)
	}
	switch {
	case temporalTables == 1:
		return nil // an existing dev-server database: reuse it
	case tables > 0:
		return fmt.Errorf("inspect database %s: %w", path, ErrNotTemporalDB)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("set up schema in %s: %w", path, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := sqliteschema.SetupSchemaOnDB(schemaTx{tx: tx, name: path}); err != nil {
		return fmt.Errorf("set up schema in %s: %w", path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("set up schema in %s: %w", path, err)
	}
	return nil
}

// fileDSN is the modernc.org/sqlite DSN for our private connection, with the same pragmas the
// server's connections use.
func fileDSN(path string) string {
	q := url.Values{}
	for _, k := range slices.Sorted(maps.Keys(fileConnectAttributes)) {
		if k == "mode" {
			q.Set(k, fileConnectAttributes[k])
			continue
		}
		q.Add("_pragma", k+"="+fileConnectAttributes[k])
	}
	return "file:" + path + "?" + q.Encode()
}

// ensureNamespace creates the namespace with the search attributes when it is absent, and adds
// the attributes it lacks when it exists (an older database). It writes through the server's
// own metadata persistence before the server starts, so every service loads the final
// namespace on start: registering attributes through the operator API after start would leave
// history's namespace cache without them for up to its refresh interval.
//
// It returns the custom search attribute columns some namespace in the database uses (see
// trimVisibilityIndexes).
func ensureNamespace(
	ctx context.Context,
	cfg *config.SQL,
	clusterName, namespace string,
	attrs map[string]enumspb.IndexedValueType,
) (map[string]bool, error) {
	serializer := serialization.NewSerializer()
	logger := log.NewNoopLogger()
	factory := sqlpersistence.NewFactory(*cfg, resolver.NewNoopResolver(), clusterName, logger,
		metrics.NoopMetricsHandler, serializer)
	defer factory.Close()
	store, err := factory.NewMetadataStore()
	if err != nil {
		return nil, fmt.Errorf("open namespace store: %w", err)
	}
	manager := persistence.NewMetadataManagerImpl(store, serializer, logger, clusterName)
	defer manager.Close()

	if err := registerNamespace(ctx, manager, clusterName, namespace, attrs); err != nil {
		return nil, err
	}
	return searchAttributeColumnsInUse(ctx, manager)
}

// registerNamespace is ensureNamespace's work on one namespace.
func registerNamespace(
	ctx context.Context,
	manager persistence.MetadataManager,
	clusterName, namespace string,
	attrs map[string]enumspb.IndexedValueType,
) error {
	got, err := manager.GetNamespace(ctx, &persistence.GetNamespaceRequest{Name: namespace})
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &notFound):
		aliases, err := assignSearchAttributes(nil, attrs)
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", namespace, err)
		}
		nsConfig, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, nil)
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", namespace, err)
		}
		nsConfig.Detail.Config.CustomSearchAttributeAliases = aliases
		_, err = manager.CreateNamespace(ctx, &persistence.CreateNamespaceRequest{
			Namespace:         nsConfig.Detail,
			IsGlobalNamespace: nsConfig.IsGlobal,
		})
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", namespace, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	}

	detail := got.Namespace
	if detail.GetConfig() == nil {
		return fmt.Errorf("register search attributes on namespace %s: namespace has no config", namespace)
	}
	aliases := detail.GetConfig().GetCustomSearchAttributeAliases()
	added, err := assignSearchAttributes(aliases, attrs)
	if err != nil {
		return fmt.Errorf("register search attributes on namespace %s: %w", namespace, err)
	}
	if len(added) == 0 {
		return nil
	}
	merged := maps.Clone(aliases)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, added)
	detail.Config.CustomSearchAttributeAliases = merged
	detail.ConfigVersion++

	meta, err := manager.GetMetadata(ctx)
	if err != nil {
		return fmt.Errorf("register search attributes on namespace %s: %w", namespace, err)
	}
	err = manager.UpdateNamespace(ctx, &persistence.UpdateNamespaceRequest{
		Namespace:           detail,
		IsGlobalNamespace:   got.IsGlobalNamespace,
		NotificationVersion: meta.NotificationVersion,
	})
	if err != nil {
		return fmt.Errorf("register search attributes on namespace %s: %w", namespace, err)
	}
	return nil
}

// searchAttributeColumnsInUse returns the custom search attribute columns (Keyword01, ...) that
// some namespace, deleted ones included, maps an attribute onto.
func searchAttributeColumnsInUse(ctx context.Context, manager persistence.MetadataManager) (map[string]bool, error) {
	inUse := map[string]bool{}
	var token []byte
	for {
		page, err := manager.ListNamespaces(ctx, &persistence.ListNamespacesRequest{
			PageSize:       100,
			NextPageToken:  token,
			IncludeDeleted: true,
		})
		if err != nil {
			return nil, fmt.Errorf("list namespaces: %w", err)
		}
		for _, ns := range page.Namespaces {
			for column := range ns.Namespace.GetConfig().GetCustomSearchAttributeAliases() {
				inUse[column] = true
			}
		}
		if token = page.NextPageToken; len(token) == 0 {
			return inUse, nil
		}
	}
}

// assignSearchAttributes maps each wanted attribute the namespace lacks onto a free
// pre-allocated column of its type (Keyword01, Keyword02, ...), as the operator API does for
// SQL visibility. aliases is the namespace's column→name map. It returns the new column→name
// entries, or an error when an attribute exists with another type or no column is left.
func assignSearchAttributes(
	aliases map[string]string,
	wanted map[string]enumspb.IndexedValueType,
) (map[string]string, error) {
	columns := dbSearchAttributeColumns()
	byName := make(map[string]string, len(aliases))
	for column, name := range aliases {
		byName[name] = column
	}
	added := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(wanted)) {
		typ := wanted[name]
		if column, ok := byName[name]; ok {
			if columns[column] != typ {
				return nil, fmt.Errorf("search attribute %s: %w (has %s, want %s)",
					name, ErrSearchAttributeType, columns[column], typ)
			}
			continue
		}
		free := ""
		for _, column := range slices.Sorted(maps.Keys(columns)) {
			_, used := aliases[column]
			_, taken := added[column]
			if columns[column] == typ && !used && !taken {
				free = column
				break
			}
		}
		if free == "" {
			return nil, fmt.Errorf("search attribute %s: no free %s column left", name, typ)
		}
		added[free] = name
	}
	return added, nil
}

// dbSearchAttributeColumns returns the SQL visibility schema's pre-allocated custom search
// attribute columns and their types.
func dbSearchAttributeColumns() map[string]enumspb.IndexedValueType {
	return sadefs.GetDBIndexSearchAttributes(nil).GetCustomSearchAttributes()
}

// schemaTx adapts a database/sql transaction to the sqlplugin.AdminDB that
// sqliteschema.SetupSchemaOnDB takes. SetupSchemaOnDB only calls Exec; the rest report
// errUnsupported.
type schemaTx struct {
	tx   *sql.Tx
	name string
}

var _ sqlplugin.AdminDB = schemaTx{}

func (s schemaTx) Exec(stmt string, args ...any) error {
	_, err := s.tx.Exec(stmt, args...)
	return err
}

func (s schemaTx) CreateSchemaVersionTables() error                 { return errUnsupported }
func (s schemaTx) ReadSchemaVersion(string) (string, error)         { return "", errUnsupported }
func (s schemaTx) UpdateSchemaVersion(string, string, string) error { return errUnsupported }
func (s schemaTx) WriteSchemaUpdateLog(string, string, string, string) error {
	return errUnsupported
}
func (s schemaTx) ListTables(string) ([]string, error) { return nil, errUnsupported }
func (s schemaTx) DropTable(string) error              { return errUnsupported }
func (s schemaTx) DropAllTables(string) error          { return errUnsupported }
func (s schemaTx) CreateDatabase(string) error         { return nil } // SQLite has no CREATE DATABASE
func (s schemaTx) DropDatabase(string) error           { return errUnsupported }
func (s schemaTx) DbName() string                      { return s.name }
func (s schemaTx) PluginName() string                  { return sqliteplugin.PluginName }
func (s schemaTx) Close() error                        { return nil }
func (s schemaTx) ExpectedVersion() string             { return sqliteschema.Version }
func (s schemaTx) VerifyVersion() error                { return nil }
