package config

import (
	"errors"
	"fmt"
	"github.com/nexo-temporal/nexo/internal/suggest"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// Sentinel errors of the package; the returned errors wrap them and add the file or key.
var (
	// ErrUnknownKey is wrapped by the error for a config-file key that no field reads.
	ErrUnknownKey = errors.New("unknown config key")
)

// envPrefix starts every environment variable Load reads.
const envPrefix = "NEXO"

// envConfigFile names the config file when neither LoadOptions.File nor --config does.
const envConfigFile = envPrefix + "_CONFIG"

// LoadOptions says where Load looks. The zero value reads ./nexo.yaml if present, the
// process environment, and no flags.
type LoadOptions struct {
	// File is the config file to read; it must exist. Empty: the --config flag, then
	// NEXO_CONFIG, then ./nexo.yaml if present.
	File string
	// Flags are the parsed command-line flags; nil means none. Load reads the flags
	// BindFlags defines and any flag named exactly like a key ("dev.ui_port"), when set.
	Flags *pflag.FlagSet
	// Env is the environment as "KEY=value" pairs; nil means os.Environ(). Tests pass
	// their own so they need not touch the process environment.
	Env []string
	// RequireFile makes a missing config file an error even when none was named.
	RequireFile bool
}

// Load builds the Config from defaults, the config file, NEXO_* environment variables and
// flags (later ones win), then validates it. It never logs; every problem is in the
// returned error, which names the file, key or field at fault.
func Load(opts LoadOptions) (Config, error) {
	env := envMap(opts.Env)
	defaults := defaultValues()

	v := viper.New()
	for key, value := range defaults {
		v.SetDefault(key, value)
	}

	file, err := configFile(opts, env)
	if err != nil {
		return Config{}, err
	}
	if file != "" {
		if err := readFile(v, file); err != nil {
			return Config{}, err
		}
	}

	// Viper reads the environment only through os.LookupEnv, so an injected Env could not
	// reach it. Instead the NEXO_* values are merged over the file's: the same precedence
	// (flag > env > file > default), for exactly the keys Config has.
	if overrides := envOverrides(defaults, env); len(overrides) > 0 {
		if err := v.MergeConfigMap(overrides); err != nil {
			return Config{}, fmt.Errorf("apply %s_* environment: %w", envPrefix, err)
		}
	}

	if opts.Flags != nil {
		if err := bindFlags(v, opts.Flags, defaults); err != nil {
			return Config{}, err
		}
	}

	var (
		cfg Config
		md  mapstructure.Metadata
	)
	decodeErr := v.Unmarshal(&cfg, func(dc *mapstructure.DecoderConfig) {
		dc.Metadata = &md
		dc.DecodeHook = decodeHook()
	})
	if file != "" {
		if err := endpointsAsWritten(file, env, &cfg, &md.Unused); err != nil { // config/endpoints.go
			return Config{}, err
		}
	}
	// Only the file can carry keys Config lacks: the environment and flags are looked up
	// by known key. Report them before any decode error, since a typo is the likelier fault.
	md.Unused = priceKeysRead(file, md.Unused)
	if len(md.Unused) > 0 {
		return Config{}, unknownKeys(file, md.Unused, defaults)
	}
	if file != "" {
		if err := checkAsWritten(file, &cfg); err != nil {
			return Config{}, err
		}
	}
	if decodeErr != nil {
		return Config{}, fmt.Errorf("decode config%s: %w", inFile(file), fieldErrors(decodeErr, env))
	}
	applyPortBase(v, opts.Flags, &cfg) // before givenAtDefault: an address the base gave counts as given
	cfg.Temporal.givenAtDefault = givenAtDefault(v, opts.Flags, cfg.Temporal)
	cfg.Temporal.sources = sources(v, opts.Flags, env, file)
	if file != "" && env[envName("agents")] == "" && !flagSet(opts.Flags, "agents") {
		if err := agentsAsWritten(file, &cfg); err != nil {
			return Config{}, err
		}
	}
	if file != "" {
		if err := pricesAsWritten(file, &cfg); err != nil {
			return Config{}, err
		}
	}
	resolveLoopCommands(file, &cfg)
	if err := readOutputSchemas(file, &cfg); err != nil {
		return Config{}, fmt.Errorf("invalid config%s: %w", inFile(file), err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid config%s: %w", inFile(file), err)
	}
	if err := checkPaths(cfg); err != nil {
		return Config{}, fmt.Errorf("invalid config%s: %w", inFile(file), err)
	}
	noteUnsetSecrets(&cfg, env)
	return cfg, nil
}

// configFile picks the file to read ("" for none) following LoadOptions.File's rules.
func configFile(opts LoadOptions, env map[string]string) (string, error) {
	named, source := opts.File, ""
	if named == "" && opts.Flags != nil {
		if f := opts.Flags.Lookup(FlagConfig); f != nil && f.Changed {
			named, source = f.Value.String(), "--"+FlagConfig
		}
	}
	if named == "" && env[envConfigFile] != "" {
		named, source = env[envConfigFile], envConfigFile
	}
	if named != "" {
		if source != "" {
			source = " (from " + source + ")"
		}
		info, err := os.Stat(named)
		if err != nil {
			return "", fmt.Errorf("config file %q%s: %w", named, source, err)
		}
		if info.IsDir() {
			return "", fmt.Errorf("config file %q%s: is a directory", named, source)
		}
		return named, nil
	}
	switch _, err := os.Stat(DefaultFile); {
	case err == nil:
		return DefaultFile, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("config file %q: %w", DefaultFile, err)
	case opts.RequireFile:
		return "", fmt.Errorf("no config file: pass --%s, set %s or create ./%s: %w",
			FlagConfig, envConfigFile, DefaultFile, fs.ErrNotExist)
	}
	return "", nil
}

// readFile loads file into v, choosing the format by extension.
func readFile(v *viper.Viper, file string) error {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	switch ext {
	case "":
		ext = "yaml"
	case "yaml", "yml", "json", "toml":
	default:
		return fmt.Errorf("config file %q: unsupported extension %q (want .yaml, .yml, .json or .toml)", file, "."+ext)
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("open config file: %w", err)
	}
	defer f.Close()
	v.SetConfigType(ext)
	if err := v.ReadConfig(f); err != nil {
		return fmt.Errorf("read config file %q: %w", file, err)
	}
	return nil
}

// envMap turns "KEY=value" pairs into a map; nil means the process environment.
func envMap(pairs []string) map[string]string {
	if pairs == nil {
		pairs = os.Environ()
	}
	m := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// envName is the environment variable of a key: temporal.task_queue → NEXO_TEMPORAL_TASK_QUEUE.
func envName(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// envOverrides returns the set, non-empty NEXO_* variables of known keys as a nested map
// ready for viper.MergeConfigMap. Values stay strings; decoding converts them.
func envOverrides(defaults map[string]any, env map[string]string) map[string]any {
	out := map[string]any{}
	for key := range defaults {
		value := env[envName(key)]
		if value == "" {
			continue
		}
		m := out
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = value
	}
	return out
}

// bindFlags binds every flag the user set whose name is a config key, or one of the
// short names BindFlags defines. Flags left unset are not bound at all, so only Defaults
// supplies defaults and an unset flag can never shadow the file or the environment.
func bindFlags(v *viper.Viper, fs *pflag.FlagSet, defaults map[string]any) error {
	bind := func(key string, f *pflag.Flag) error {
		if err := v.BindPFlag(key, f); err != nil {
			return fmt.Errorf("bind flag --%s to %s: %w", f.Name, key, err)
		}
		return nil
	}
	// Short names first, so a flag spelled as the key itself wins when both are set.
	for _, name := range slices.Sorted(maps.Keys(flagKeys)) {
		if f := fs.Lookup(name); f != nil && f.Changed {
			if err := bind(flagKeys[name], f); err != nil {
				return err
			}
		}
	}
	for key := range defaults {
		if f := fs.Lookup(key); f != nil && f.Changed {
			if err := bind(key, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// flagSet reports whether the user set the flag called name.
func flagSet(fs *pflag.FlagSet, name string) bool {
	if fs == nil {
		return false
	}
	f := fs.Lookup(name)
	return f != nil && f.Changed
}

// decodeHook converts config values into Config's field types.
func decodeHook() mapstructure.DecodeHookFunc {
	return mapstructure.ComposeDecodeHookFunc(
		rejectBareNumberDuration,
		stringToAPIDuration,
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToWeakSliceHookFunc(","),
	)
}

// fileSection is the value at path (keys matched regardless of case) in a YAML or JSON
// config file as the file itself has it, for the sections viper's reading mangles (it folds
// keys to lower case and splits them at dots); nil when the file is TOML (viper's reading
// stands), does not parse (viper reported it), or has no such section.
func fileSection(file string, path ...string) (any, error) {
	switch strings.ToLower(filepath.Ext(file)) {
	case "", ".yaml", ".yml", ".json":
	default:
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read config file %q: %w", file, err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, nil // viper read it; keep its reading
	}
	for _, key := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		v = nil
		for k, val := range m {
			if strings.EqualFold(k, key) {
				v = val
			}
		}
	}
	return v, nil
}

// agentsAsWritten decodes the file's agents: list again from the file itself. Viper folds
// every key to lower case, which suits config keys but breaks the names inside agents'
// maps: environment variables (sandbox.env: {LANG: C.UTF-8}, mcp env), HTTP headers and
// required commands (requires.commands: {Rscript: "*"}). The list has already been
// decoded (and its unknown keys reported) through viper, so this only restores case.
// TOML files keep viper's reading.
func agentsAsWritten(file string, cfg *Config) error {
	list, err := fileSection(file, "agents")
	if list == nil || err != nil {
		return err
	}
	var specs []agents.Spec
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result: &specs, WeaklyTypedInput: true, DecodeHook: decodeHook(),
	})
	if err != nil {
		return fmt.Errorf("decode agents of %q: %w", file, err)
	}
	if err := dec.Decode(list); err != nil {
		return nil // the decode through viper succeeded; keep it
	}
	if len(specs) == len(cfg.Agents) {
		cfg.Agents = specs
	}
	return nil
}

// durationType is the type the duration decode hook guards.
var (
	durationType    = reflect.TypeOf(time.Duration(0))
	apiDurationType = reflect.TypeOf(api.Duration(0))
)

// stringToAPIDuration reads "10m" into an api.Duration (a duration that travels in
// workflow input, such as sandbox.idle_timeout); a bare number is refused as for
// time.Duration.
func stringToAPIDuration(from, to reflect.Type, data any) (any, error) {
	if to != apiDurationType {
		return data, nil
	}
	s, ok := data.(string)
	if !ok {
		return nil, fmt.Errorf("%v: want a duration with a unit, such as \"10m\"", data)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("%q: want a duration such as \"10m\"", s)
	}
	return api.Duration(d), nil
}

// rejectBareNumberDuration refuses a number for a duration field: YAML "shell_timeout:
// 120" would otherwise decode as 120 nanoseconds.
func rejectBareNumberDuration(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return nil, fmt.Errorf("bare number %v: want a duration with a unit, such as \"2m\" or \"30s\"", data)
	}
	return data, nil
}

// fieldErrors rewrites mapstructure's decode errors as *FieldError, one per field, so a
// value of the wrong type reads like a Validate error ("dev.ui_port \"eighty\": want int")
// and says which environment variable it came from.
func fieldErrors(err error, env map[string]string) error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		var de *mapstructure.DecodeError
		if !errors.As(err, &de) {
			out = append(out, err)
			return
		}
		fe := &FieldError{Field: de.Name(), Problem: de.Unwrap().Error()}
		var (
			pe *mapstructure.ParseError
			ue *mapstructure.UnconvertibleTypeError
		)
		switch {
		case errors.As(de, &pe):
			fe.Value, fe.Problem = pe.Value, "want "+pe.Expected.Type().String()
		case errors.As(de, &ue):
			fe.Value, fe.Problem = ue.Value, "want "+ue.Expected.Type().String()
		}
		if name := envName(de.Name()); env[name] != "" {
			fe.Problem += " (from " + name + ")"
		}
		out = append(out, fe)
	}
	// mapstructure wraps several errors as "decoding failed ...: %w" around a join.
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		walk(joined.(error))
	} else {
		walk(err)
	}
	return errors.Join(out...)
}

// unknownKeys builds the error for config-file keys no field reads, suggesting the
// nearest known key for each.
func unknownKeys(file string, unused []string, defaults map[string]any) error {
	sort.Strings(unused)
	known := slices.Sorted(maps.Keys(defaults))
	errs := make([]error, 0, len(unused))
	for _, key := range unused {
		hint := ""
		if s := suggest.Nearest(key, known); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		errs = append(errs, fmt.Errorf("%w %q%s", ErrUnknownKey, key, hint))
	}
	return fmt.Errorf("config%s: %w", inFile(file), errors.Join(errs...))
}

// inFile renders " file F" for error messages, or nothing when no file was read.
func inFile(file string) string {
	if file == "" {
		return ""
	}
	return fmt.Sprintf(" file %q", file)
}

// defaultValues flattens Defaults() into dotted keys ("temporal.tls.enabled") and values,
// following the mapstructure tags. Nested structs are descended; anything else (scalars,
// durations, maps, slices) is one key. This is what makes a new field a known key with
// an environment variable, without listing it anywhere else.
func defaultValues() map[string]any {
	out := map[string]any{}
	flatten("", reflect.ValueOf(Defaults()), out)
	return out
}

func flatten(prefix string, v reflect.Value, out map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		field := t.Field(i)
		if !field.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(field.Tag.Get("mapstructure"), ",")
		if name == "" || name == "-" {
			name = strings.ToLower(field.Name)
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			flatten(key, fv, out)
			continue
		}
		out[key] = fv.Interface()
	}
}
