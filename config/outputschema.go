package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"

	"github.com/nexo-temporal/nexo/agents"
)

// readOutputSchemas replaces each agent's `output_schema: {file: path}` with the schema
// the file holds (JSON or YAML), path relative to the config file's folder (to the
// working directory without a config file), so the spec the worker records carries the
// schema itself and a run never depends on a file.
func readOutputSchemas(file string, cfg *Config) error {
	var errs []string
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		if a.OutputSchema == nil {
			continue
		}
		field := fmt.Sprintf("agents[%s].output_schema", orIndex(a.Name, i))
		ref, ok := a.OutputSchema["file"]
		if !ok || len(a.OutputSchema) != 1 {
			if strings.EqualFold(filepath.Ext(file), ".toml") {
				// Viper folds a TOML file's keys to lower case (YAML and JSON are read
				// again as written), which would rename the schema's properties.
				errs = append(errs, fmt.Sprintf("%s: an inline schema needs a YAML or JSON config file (TOML keys are read in lower case, which would rename its properties); use output_schema: {file: path}", field))
			}
			continue
		}
		name, ok := ref.(string)
		if !ok || strings.TrimSpace(name) == "" {
			errs = append(errs, fmt.Sprintf("%s.file: %v: want the path of a JSON or YAML schema file", field, ref))
			continue
		}
		p := name
		if !filepath.IsAbs(p) && file != "" {
			p = filepath.Join(filepath.Dir(file), p)
		}
		schema, err := readSchemaFile(p)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s.file %q: %v", field, name, err))
			continue
		}
		a.OutputSchema = schema
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func readSchemaFile(p string) (map[string]any, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, want a schema file", p)
	}
	if st.Size() > agents.MaxOutputSchemaBytes*4 {
		return nil, fmt.Errorf("%s is %d bytes, too large for a schema", p, st.Size())
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil { // YAML is a superset of JSON
		return nil, fmt.Errorf("%s does not parse as JSON or YAML: %v", p, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s holds %s, want a JSON Schema object", p, kindOf(v))
	}
	return m, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case string:
		return "a string"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// checkOutputSchema reports why m is not a JSON Schema that jsonschema-go can validate
// with (the library the agent loop validates replies with): a keyword of the wrong type, a
// $ref that leads nowhere or off the schema, a bad pattern, an unknown type name, or a
// keyword JSON Schema does not have (a typo such as "propertes", which would otherwise
// validate nothing).
func checkOutputSchema(m map[string]any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("is not JSON: %v", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("is not a valid JSON Schema: %v", err)
	}
	if problem := walkSchema(&s, ""); problem != "" {
		return fmt.Errorf("is not a valid JSON Schema: %s", problem)
	}
	if _, err := s.Resolve(nil); err != nil {
		return fmt.Errorf("is not a valid JSON Schema: %v", err)
	}
	return nil
}

var schemaTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

var (
	schemaPtrType   = reflect.TypeOf((*jsonschema.Schema)(nil))
	schemaSliceType = reflect.TypeOf([]*jsonschema.Schema(nil))
	schemaMapType   = reflect.TypeOf(map[string]*jsonschema.Schema(nil))
)

// walkSchema checks s and every subschema (found by type, so no keyword is missed) for
// unknown type names and keywords; the first problem, with its JSON pointer, or "".
func walkSchema(s *jsonschema.Schema, at string) string {
	if s == nil {
		return ""
	}
	where := at
	if where == "" {
		where = "/"
	}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t != "" && !slices.Contains(schemaTypes, t) {
			return fmt.Sprintf("%s: type %q is not one of %s", where, t, strings.Join(schemaTypes, ", "))
		}
	}
	if len(s.Extra) > 0 {
		keys := make([]string, 0, len(s.Extra))
		for k := range s.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return fmt.Sprintf("%s: unknown keyword %q", where, keys[0])
	}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), jsonName(v.Type().Field(i))
		switch f.Type() {
		case schemaPtrType:
			if p := walkSchema(f.Interface().(*jsonschema.Schema), at+"/"+name); p != "" {
				return p
			}
		case schemaSliceType:
			for j, sub := range f.Interface().([]*jsonschema.Schema) {
				if p := walkSchema(sub, fmt.Sprintf("%s/%s/%d", at, name, j)); p != "" {
					return p
				}
			}
		case schemaMapType:
			subs := f.Interface().(map[string]*jsonschema.Schema)
			keys := make([]string, 0, len(subs))
			for k := range subs {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if p := walkSchema(subs[k], at+"/"+name+"/"+k); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

func jsonName(f reflect.StructField) string {
	if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n != "" && n != "-" {
		return n
	}
	return strings.ToLower(f.Name[:1]) + f.Name[1:]
}
