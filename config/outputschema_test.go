package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadTyped writes files (config at conf/nexo.yaml, the rest beside it) in a fresh
// directory, runs from another one, and loads the config.
func loadTyped(t *testing.T, agent string, files map[string]string) (Config, error) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(filepath.Join(conf, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	files["nexo.yaml"] = "llm: {base_url: http://127.0.0.1:11434/v1}\nagents:\n" + agent
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(t.TempDir()) // the schema file is found from the config file, not the working directory
	return Load(LoadOptions{File: filepath.Join(conf, "nexo.yaml"), Env: []string{}})
}

func schemaJSON(t *testing.T, cfg Config) string {
	t.Helper()
	b, err := json.Marshal(cfg.Agents[0].OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoadOutputSchemaInline(t *testing.T) {
	cfg, err := loadTyped(t, `  - name: extract
    output_retries: 3
    output_schema:
      type: object
      required: [firstName]
      properties:
        firstName: {type: string}
        age: {type: integer, minimum: 0}
`, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"properties":{"age":{"minimum":0,"type":"integer"},"firstName":{"type":"string"}},"required":["firstName"],"type":"object"}`
	if got := schemaJSON(t, cfg); got != want {
		t.Errorf("schema = %s, want %s (property names keep their case)", got, want)
	}
	if r := cfg.Agents[0].OutputRetryCount(); r != 3 {
		t.Errorf("output_retries = %d, want 3", r)
	}
}

func TestLoadOutputSchemaFile(t *testing.T) {
	for _, tc := range []struct{ name, file, body string }{
		{"json", "schemas/person.json", `{"type": "object", "properties": {"firstName": {"type": "string"}}}`},
		{"yaml", "schemas/person.yaml", "type: object\nproperties:\n  firstName: {type: string}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadTyped(t, "  - name: extract\n    output_schema: {file: "+tc.file+"}\n", map[string]string{tc.file: tc.body})
			if err != nil {
				t.Fatal(err)
			}
			if got := schemaJSON(t, cfg); got != `{"properties":{"firstName":{"type":"string"}},"type":"object"}` {
				t.Errorf("schema = %s, want the file's", got)
			}
			if r := cfg.Agents[0].OutputRetryCount(); r != 2 {
				t.Errorf("output_retries = %d, want the default 2", r)
			}
		})
	}
}

// TestOutputSchemaRefused: a schema that is not valid JSON Schema, or a file that is not
// there, is refused at load, naming the agent and the problem.
func TestOutputSchemaRefused(t *testing.T) {
	for _, tc := range []struct {
		name, agent string
		files       map[string]string
		want        []string
	}{
		{"missing file", "output_schema: {file: schemas/nope.json}", nil,
			[]string{"agents[extract].output_schema.file", "schemas/nope.json", "no such file"}},
		{"file not a schema object", "output_schema: {file: schemas/list.json}", map[string]string{"schemas/list.json": `[1, 2]`},
			[]string{"agents[extract].output_schema.file", "a list, want a JSON Schema object"}},
		{"file not JSON or YAML", "output_schema: {file: schemas/bad.json}", map[string]string{"schemas/bad.json": `{"type": "object",`},
			[]string{"agents[extract].output_schema.file", "does not parse"}},
		{"unknown type", "output_schema: {type: obejct}", nil,
			[]string{"agents[extract].output_schema", `type "obejct" is not one of`}},
		{"nested unknown type", "output_schema: {type: object, properties: {age: {type: int}}}", nil,
			[]string{"agents[extract].output_schema", `/properties/age: type "int"`}},
		{"keyword of the wrong type", "output_schema: {type: object, required: firstName}", nil,
			[]string{"agents[extract].output_schema: is not a valid JSON Schema", "required"}},
		{"unknown keyword", "output_schema: {type: object, propertes: {a: {type: string}}}", nil,
			[]string{"agents[extract].output_schema", `unknown keyword "propertes"`}},
		{"dangling ref", `output_schema: {$ref: "#/$defs/person"}`, nil,
			[]string{"agents[extract].output_schema", "person"}},
		{"remote ref", `output_schema: {$ref: "https://example.com/person.json"}`, nil,
			[]string{"agents[extract].output_schema", "cannot resolve remote schemas"}},
		{"bad pattern", `output_schema: {type: string, pattern: "("}`, nil,
			[]string{"agents[extract].output_schema", "pattern"}},
		{"retries out of range", "output_schema: {type: object}\n    output_retries: 11", nil,
			[]string{"agents[extract].output_retries", "11 is not between 0 and 10"}},
		{"retries without a schema", "output_retries: 1", nil,
			[]string{"agents[extract].output_retries", "only with an output_schema"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range tc.files {
				files[k] = v
			}
			_, err := loadTyped(t, "  - name: extract\n    "+tc.agent+"\n", files)
			if err == nil {
				t.Fatal("loaded, want the schema refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOutputSchemaTOML: a TOML config takes a schema file, not an inline schema, whose
// property names viper would fold to lower case.
func TestOutputSchemaTOML(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("person.json", `{"type": "object", "properties": {"firstName": {"type": "string"}}}`)
	write("file.toml", "[llm]\nbase_url = \"http://x:1/v1\"\n[[agents]]\nname = \"extract\"\noutput_schema = {file = \"person.json\"}\n")
	cfg, err := Load(LoadOptions{File: filepath.Join(dir, "file.toml"), Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := schemaJSON(t, cfg); !strings.Contains(got, `"firstName"`) {
		t.Errorf("schema = %s, want the file's, as written", got)
	}
	write("inline.toml", "[llm]\nbase_url = \"http://x:1/v1\"\n[[agents]]\nname = \"extract\"\n[agents.output_schema]\ntype = \"object\"\n")
	_, err = Load(LoadOptions{File: filepath.Join(dir, "inline.toml"), Env: []string{}})
	if err == nil || !strings.Contains(err.Error(), "agents[extract].output_schema: an inline schema needs a YAML or JSON config file") {
		t.Errorf("inline schema in TOML: %v, want it refused", err)
	}
}
