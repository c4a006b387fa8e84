package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/nexo-temporal/nexo/internal/suggest"
)

// unknownFieldPrefix starts encoding/json's error for a key DisallowUnknownFields refuses.
const unknownFieldPrefix = "json: unknown field "

// unknownField rewrites encoding/json's `json: unknown field "imput"` for a body decoded
// into v as `unknown field "imput" (did you mean "input"?)`, or with the fields the body
// takes when none is close. It names the fields only when the key is one of the body's
// own top-level keys: json's error has no path, and a nested object's fields are other
// names. Any other error comes back as it was.
func unknownField(err error, body []byte, v any) error {
	quoted, ok := strings.CutPrefix(err.Error(), unknownFieldPrefix)
	if !ok {
		return err
	}
	name, uerr := strconv.Unquote(quoted)
	if uerr != nil {
		return err
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return fmt.Errorf("unknown field %q", name)
	}
	if _, ok := top[name]; !ok {
		return fmt.Errorf("unknown field %q", name)
	}
	known := jsonFields(reflect.TypeOf(v))
	if len(known) == 0 {
		return fmt.Errorf("unknown field %q", name)
	}
	if m := suggest.Nearest(strings.ToLower(name), known); m != "" {
		return fmt.Errorf("unknown field %q (did you mean %q?)", name, m)
	}
	return fmt.Errorf("unknown field %q (it takes %s)", name, strings.Join(known, ", "))
}

// jsonFields returns the JSON names of the fields a struct (or pointer to one) decodes,
// embedded structs' included, sorted.
func jsonFields(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	seen := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
				walk(ft)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			seen[tag] = true
		}
	}
	walk(t)
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// decodeStrict decodes body into v refusing unknown fields, with the did-you-mean of
// unknownField.
func decodeStrict(body []byte, v any) (more bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, unknownField(err, body, v)
	}
	return dec.More(), nil
}
