package devserver

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
)

// keptVisibilityIndexes are the indexes on executions_visibility that trimVisibilityIndexes
// always keeps: the ones behind the lists people run on a dev server. The Web UI's and
// `starter list`'s default list (the query converter adds `TemporalNamespaceDivision IS NULL`
// to every query that does not name a division, and orders by close and start time), and
// the filters on workflow id, workflow type and status.
var keptVisibilityIndexes = []string{
	"default_idx",
	"by_temporal_namespace_division",
	"by_workflow_id",
	"by_workflow_type",
	"by_status",
}

// trimVisibilityIndexes drops the executions_visibility indexes a dev server's queries do not
// use, and creates the index of every custom search attribute column in use that lacks one.
//
// The SQLite visibility schema indexes 57 columns of executions_visibility, most of them
// generated from the search_attributes JSON, and each index costs on every visibility write:
// the row's insert at start, its replacement at each search attribute upsert and at close.
// With every index, those writes were a third of the server's CPU time and the largest share
// of the time its one database connection is busy, which bounds throughput (go run ./bench
// devserver). An index only makes a query faster, never changes its answer: a list filtered
// on a column without one scans the namespace's rows, which on a dev server's database takes
// milliseconds. Kept: keptVisibilityIndexes, and the index of each custom column that a
// namespace maps a search attribute onto (columnsInUse), created when missing, so an
// attribute registered while the server ran gets its index at the next start.
func trimVisibilityIndexes(ctx context.Context, cfg *config.SQL, columnsInUse map[string]bool) error {
	db, err := sql.Open("sqlite", ownDSN(cfg))
	if err != nil {
		return fmt.Errorf("open database %s: %w", cfg.DatabaseName, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	existing, err := visibilityIndexNames(ctx, db)
	if err != nil {
		return fmt.Errorf("list visibility indexes in %s: %w", cfg.DatabaseName, err)
	}
	keep := map[string]bool{}
	for _, name := range keptVisibilityIndexes {
		keep[name] = true
	}
	var create []string
	columns := dbSearchAttributeColumns()
	for _, column := range slices.Sorted(maps.Keys(columnsInUse)) {
		switch columns[column] {
		case enumspb.INDEXED_VALUE_TYPE_TEXT, enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
			enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED:
			continue // full-text columns are indexed by the schema's FTS tables; unknown: no index
		}
		name := customColumnIndexName(column)
		keep[name] = true
		if !slices.Contains(existing, name) {
			create = append(create, fmt.Sprintf(
				`CREATE INDEX %s ON executions_visibility `+
					`(namespace_id, %s, (COALESCE(close_time, '9999-12-31 23:59:59+00:00')) DESC, start_time DESC, run_id)`,
				name, column))
		}
	}
	var drop []string
	for _, name := range existing {
		if !keep[name] {
			drop = append(drop, name)
		}
	}
	if len(drop) == 0 && len(create) == 0 {
		return nil // the usual start: trimmed before, no new attribute
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("trim visibility indexes in %s: %w", cfg.DatabaseName, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	for _, name := range drop {
		// Names come from sqlite_master; quoting keeps any odd one a name.
		if _, err := tx.ExecContext(ctx, `DROP INDEX IF EXISTS "`+strings.ReplaceAll(name, `"`, `""`)+`"`); err != nil {
			return fmt.Errorf("drop visibility index %s in %s: %w", name, cfg.DatabaseName, err)
		}
	}
	for _, stmt := range create {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create visibility index in %s: %w", cfg.DatabaseName, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("trim visibility indexes in %s: %w", cfg.DatabaseName, err)
	}
	return nil
}

// visibilityIndexNames returns the names of the indexes on executions_visibility (not the
// primary key's).
func visibilityIndexNames(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx,
		`SELECT name FROM sqlite_master
		 WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL
		 ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// customColumnIndexName is the schema's name for the index of a custom search attribute
// column: Keyword01 → by_keyword_01, Datetime03 → by_datetime_03.
func customColumnIndexName(column string) string {
	i := strings.IndexFunc(column, unicode.IsDigit)
	if i < 0 {
		return "by_" + strings.ToLower(column)
	}
	return "by_" + strings.ToLower(column[:i]) + "_" + column[i:]
}

// ownDSN is the modernc.org/sqlite DSN of a private connection to the database cfg names: the
// file with the server's pragmas, or the shared-cache in-memory database (which lives while
// the server's own connection does).
func ownDSN(cfg *config.SQL) string {
	if cfg.ConnectAttributes["mode"] == "memory" {
		return "file:" + cfg.DatabaseName + "?cache=shared&mode=memory"
	}
	return fileDSN(cfg.DatabaseName)
}
