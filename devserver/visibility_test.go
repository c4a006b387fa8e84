package devserver

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

// visibilityIndexes lists the named indexes on executions_visibility in the file, sorted.
func visibilityIndexes(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", fileDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	names, err := visibilityIndexNames(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestTrimVisibilityIndexes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dev.db")
	if err := prepareDBFile(ctx, path); err != nil {
		t.Fatal(err)
	}
	stock := visibilityIndexes(t, path)
	if len(stock) < 50 {
		t.Fatalf("a fresh schema has %d visibility indexes; the test expects the stock ~57", len(stock))
	}
	// The schema names a custom column's index as customColumnIndexName does.
	for column, typ := range dbSearchAttributeColumns() {
		switch typ {
		case enumspb.INDEXED_VALUE_TYPE_TEXT, enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
			continue
		}
		if name := customColumnIndexName(column); !slices.Contains(stock, name) {
			t.Errorf("the stock schema has no index %s for column %s (%v)", name, column, typ)
		}
	}
	for _, name := range keptVisibilityIndexes {
		if !slices.Contains(stock, name) {
			t.Errorf("kept index %s is not in the stock schema", name)
		}
	}
	cfg := sqlConfig(path)
	want := func(extra ...string) []string {
		return slices.Sorted(slices.Values(append(slices.Clone(keptVisibilityIndexes), extra...)))
	}

	// Columns in use keep (or get) their index; full-text columns have none to keep.
	inUse := map[string]bool{"Keyword01": true, "Text01": true, "KeywordList02": true}
	if err := trimVisibilityIndexes(ctx, cfg, inUse); err != nil {
		t.Fatal(err)
	}
	if got, want := visibilityIndexes(t, path), want("by_keyword_01"); !slices.Equal(got, want) {
		t.Fatalf("after trimming, indexes = %v, want %v", got, want)
	}

	// An attribute registered later (a column newly in use) gets its index back at the next
	// start; running again is otherwise a no-op.
	inUse["Int02"] = true
	inUse["Datetime03"] = true
	for range 2 {
		if err := trimVisibilityIndexes(ctx, cfg, inUse); err != nil {
			t.Fatal(err)
		}
		if got, want := visibilityIndexes(t, path), want("by_datetime_03", "by_int_02", "by_keyword_01"); !slices.Equal(got, want) {
			t.Fatalf("with Int02 and Datetime03 in use, indexes = %v, want %v", got, want)
		}
	}

	// A column no namespace uses any more loses its index.
	if err := trimVisibilityIndexes(ctx, cfg, map[string]bool{"Int02": true}); err != nil {
		t.Fatal(err)
	}
	if got, want := visibilityIndexes(t, path), want("by_int_02"); !slices.Equal(got, want) {
		t.Fatalf("with only Int02 in use, indexes = %v, want %v", got, want)
	}
}

func TestCustomColumnIndexName(t *testing.T) {
	for column, want := range map[string]string{
		"Keyword01":  "by_keyword_01",
		"Keyword10":  "by_keyword_10",
		"Datetime03": "by_datetime_03",
		"Bool02":     "by_bool_02",
		"Double01":   "by_double_01",
		"Int03":      "by_int_03",
	} {
		if got := customColumnIndexName(column); got != want {
			t.Errorf("customColumnIndexName(%q) = %q, want %q", column, got, want)
		}
	}
}
