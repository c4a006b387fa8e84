package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
)

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// parsedFlags returns a FlagSet with BindFlags' flags plus extra, parsed from args.
func parsedFlags(t *testing.T, args []string, extra func(fs *pflag.FlagSet)) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	BindFlags(fs)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse flags %v: %v", args, err)
	}
	return fs
}

func TestDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	got, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load with nothing set: %v", err)
	}
	want := Config{
		Temporal:   Temporal{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "nexo"},
		Worker:     Worker{ActivityHeartbeatTimeout: 10 * time.Second, RegistryTTL: time.Minute, MaxDepth: 3},
		Dev:        Dev{IP: "127.0.0.1", FrontendPort: 7233, UIPort: 8233, DBPath: ".nexo/temporal.db"},
		Artifacts:  Artifacts{URL: "file://.nexo/artifacts", InlineLimit: 32768, CacheBytes: 64 << 20},
		Payloads:   Payloads{OffloadThreshold: 256 << 10},
		Sandbox:    Sandbox{Root: ".nexo/workspaces", ShellTimeout: 2 * time.Minute, ParkEvery: 5 * time.Minute, HostTimeout: 30 * time.Second},
		Log:        Log{Level: "info", Format: "text"},
		LLM:        LLM{APIKeyEnv: "OPENAI_API_KEY", Timeout: 5 * time.Minute, RetryFor: 6 * time.Hour},
		Gateway:    Gateway{Addr: "127.0.0.1:8234", MaxBodyBytes: 1 << 20},
		SkillsPath: "skills",
		MCP:        MCP{CredentialsFile: ".nexo/mcp-credentials.json"},
		PortBase:   7233,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load() =\n%+v\nwant\n%+v", got, want)
	}
	if !reflect.DeepEqual(Defaults(), want) {
		t.Errorf("Defaults() =\n%+v\nwant\n%+v", Defaults(), want)
	}
}

// fileYAML sets a value in every section, so each test can tell the file was read.
const fileYAML = `
temporal:
  address: file.example:7233
  namespace: file-ns
  tls:
    enabled: true
    ca_file: ca.pem
dev:
  ui_port: 9000
artifacts:
  inline_limit: 1024
sandbox:
  shell_timeout: 90s
log:
  level: warn
  format: json
`

func TestLoadSources(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // written to the working directory
		opts  func(dir string) LoadOptions
		check func(t *testing.T, c Config)
	}{
		{
			name:  "file values override defaults",
			files: map[string]string{"my.yaml": fileYAML},
			opts:  func(dir string) LoadOptions { return LoadOptions{File: filepath.Join(dir, "my.yaml"), Env: []string{}} },
			check: func(t *testing.T, c Config) {
				want := Defaults()
				want.Temporal.Address = "file.example:7233"
				want.Temporal.Namespace = "file-ns"
				want.Temporal.TLS = TLS{Enabled: true, CAFile: "ca.pem"}
				want.Dev.UIPort = 9000
				want.Artifacts.InlineLimit = 1024
				want.Sandbox.ShellTimeout = 90 * time.Second
				want.Log = Log{Level: "warn", Format: "json"}
				for _, k := range []string{"temporal.address", "temporal.namespace", "temporal.tls.enabled", "temporal.tls.ca_file"} {
					if src := c.Temporal.Source(k); !strings.HasPrefix(src, k+" in ") || !strings.HasSuffix(src, "my.yaml") {
						t.Errorf("Source(%s) = %q, want %q in .../my.yaml", k, src, k)
					}
				}
				want.Temporal.sources = c.Temporal.sources // checked just above
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got\n%+v\nwant\n%+v", c, want)
				}
			},
		},
		{
			name:  "nexo.yaml in the working directory is read when no file is named",
			files: map[string]string{DefaultFile: "temporal:\n  task_queue: from-cwd\n"},
			opts:  func(string) LoadOptions { return LoadOptions{Env: []string{}} },
			check: wantField("temporal.task_queue", func(c Config) any { return c.Temporal.TaskQueue }, "from-cwd"),
		},
		{
			name:  "json file",
			files: map[string]string{"nexo.json": `{"temporal": {"namespace": "from-json"}}`},
			opts:  func(string) LoadOptions { return LoadOptions{File: "nexo.json", Env: []string{}} },
			check: wantField("temporal.namespace", func(c Config) any { return c.Temporal.Namespace }, "from-json"),
		},
		{
			name:  "env overrides file",
			files: map[string]string{DefaultFile: fileYAML},
			opts: func(string) LoadOptions {
				return LoadOptions{Env: []string{
					"NEXO_TEMPORAL_ADDRESS=env.example:7233",
					"NEXO_DEV_UI_PORT=0",
					"NEXO_SANDBOX_SHELL_TIMEOUT=5m",
					"NEXO_TEMPORAL_TLS_SERVER_NAME=srv",
					"NEXO_LOG_LEVEL=debug",
				}}
			},
			check: func(t *testing.T, c Config) {
				if c.Temporal.Address != "env.example:7233" {
					t.Errorf("temporal.address = %q, want the env value", c.Temporal.Address)
				}
				if c.Dev.UIPort != 0 {
					t.Errorf("dev.ui_port = %d, want 0 from env", c.Dev.UIPort)
				}
				if c.Sandbox.ShellTimeout != 5*time.Minute {
					t.Errorf("sandbox.shell_timeout = %v, want 5m from env", c.Sandbox.ShellTimeout)
				}
				if c.Log.Level != "debug" {
					t.Errorf("log.level = %q, want debug from env", c.Log.Level)
				}
				if c.Temporal.TLS != (TLS{Enabled: true, CAFile: "ca.pem", ServerName: "srv"}) {
					t.Errorf("temporal.tls = %+v, want the file's TLS plus server_name from env", c.Temporal.TLS)
				}
				if c.Temporal.Namespace != "file-ns" {
					t.Errorf("temporal.namespace = %q, want file-ns (no env set)", c.Temporal.Namespace)
				}
			},
		},
		{
			name: "offload threshold and codec origins from env",
			opts: func(string) LoadOptions {
				return LoadOptions{Env: []string{
					"NEXO_PAYLOADS_OFFLOAD_THRESHOLD=4096",
					"NEXO_GATEWAY_CODEC_ORIGINS=http://127.0.0.1:8233,https://ui.example.com",
				}}
			},
			check: func(t *testing.T, c Config) {
				if c.Payloads.OffloadThreshold != 4096 {
					t.Errorf("payloads.offload_threshold = %d, want 4096 from env", c.Payloads.OffloadThreshold)
				}
				if want := []string{"http://127.0.0.1:8233", "https://ui.example.com"}; !reflect.DeepEqual(c.Gateway.CodecOrigins, want) {
					t.Errorf("gateway.codec_origins = %q, want %q", c.Gateway.CodecOrigins, want)
				}
			},
		},
		{
			// An empty variable counts as unset, so TLS stays enabled with the file's CA.
			name:  "empty env value leaves the file value",
			files: map[string]string{DefaultFile: fileYAML},
			opts:  func(string) LoadOptions { return LoadOptions{Env: []string{"NEXO_TEMPORAL_TLS_CA_FILE="}} },
			check: wantField("temporal.tls.ca_file", func(c Config) any { return c.Temporal.TLS.CAFile }, "ca.pem"),
		},
		{
			name:  "short flag overrides env",
			files: map[string]string{DefaultFile: fileYAML},
			opts: func(string) LoadOptions {
				return LoadOptions{
					Env:   []string{"NEXO_TEMPORAL_ADDRESS=env.example:7233", "NEXO_LOG_LEVEL=debug"},
					Flags: parsedFlags(t, []string{"--address", "flag.example:7233"}, nil),
				}
			},
			check: func(t *testing.T, c Config) {
				if c.Temporal.Address != "flag.example:7233" {
					t.Errorf("temporal.address = %q, want the flag value", c.Temporal.Address)
				}
				// --log-level was not given: its default must not shadow the env value.
				if c.Log.Level != "debug" {
					t.Errorf("log.level = %q, want debug from env (unset flag must not win)", c.Log.Level)
				}
			},
		},
		{
			name:  "every BindFlags flag sets its key",
			files: nil,
			opts: func(string) LoadOptions {
				return LoadOptions{Env: []string{}, Flags: parsedFlags(t, []string{
					"--address=a.example:1", "--namespace=ns", "--task-queue=tq", "--log-level=error",
				}, nil)}
			},
			check: func(t *testing.T, c Config) {
				got := []string{c.Temporal.Address, c.Temporal.Namespace, c.Temporal.TaskQueue, c.Log.Level}
				want := []string{"a.example:1", "ns", "tq", "error"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("address, namespace, task queue, log level = %q, want %q", got, want)
				}
			},
		},
		{
			name:  "flag named after a key overrides env",
			files: nil,
			opts: func(string) LoadOptions {
				return LoadOptions{
					Env: []string{"NEXO_DEV_UI_PORT=9100", "NEXO_SANDBOX_SHELL_TIMEOUT=1m"},
					Flags: parsedFlags(t, []string{"--dev.ui_port=9200", "--sandbox.shell_timeout=45s"}, func(fs *pflag.FlagSet) {
						fs.Int("dev.ui_port", 1234, "")
						fs.Duration("sandbox.shell_timeout", time.Hour, "")
						fs.Bool("temporal.tls.enabled", true, "") // not set: its default must not apply
					}),
				}
			},
			check: func(t *testing.T, c Config) {
				if c.Dev.UIPort != 9200 {
					t.Errorf("dev.ui_port = %d, want 9200 from --dev.ui_port", c.Dev.UIPort)
				}
				if c.Sandbox.ShellTimeout != 45*time.Second {
					t.Errorf("sandbox.shell_timeout = %v, want 45s from the flag", c.Sandbox.ShellTimeout)
				}
				if c.Temporal.TLS.Enabled {
					t.Error("temporal.tls.enabled = true from an unset flag's default, want false")
				}
			},
		},
		{
			name:  "--config names the file",
			files: map[string]string{"other.yaml": "temporal:\n  namespace: from-flag-file\n", DefaultFile: "temporal:\n  namespace: cwd\n"},
			opts: func(string) LoadOptions {
				return LoadOptions{Env: []string{}, Flags: parsedFlags(t, []string{"--config", "other.yaml"}, nil)}
			},
			check: wantField("temporal.namespace", func(c Config) any { return c.Temporal.Namespace }, "from-flag-file"),
		},
		{
			name:  "NEXO_CONFIG names the file",
			files: map[string]string{"env.yaml": "temporal:\n  namespace: from-env-file\n", DefaultFile: "temporal:\n  namespace: cwd\n"},
			opts:  func(string) LoadOptions { return LoadOptions{Env: []string{"NEXO_CONFIG=env.yaml"}} },
			check: wantField("temporal.namespace", func(c Config) any { return c.Temporal.Namespace }, "from-env-file"),
		},
		{
			name:  "unset sections keep defaults",
			files: map[string]string{DefaultFile: "temporal:\n  namespace: Upper\nlog:\n"},
			opts:  func(string) LoadOptions { return LoadOptions{Env: []string{}} },
			check: func(t *testing.T, c Config) {
				want := Defaults()
				want.Temporal.Namespace = "Upper"
				want.Temporal.sources = map[string]string{"temporal.namespace": "temporal.namespace in nexo.yaml"}
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got\n%+v\nwant\n%+v", c, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			for name, content := range tt.files {
				writeFile(t, dir, name, content)
			}
			c, err := Load(tt.opts(dir))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

// wantField checks one field of the loaded Config.
func wantField(key string, get func(Config) any, want any) func(*testing.T, Config) {
	return func(t *testing.T, c Config) {
		t.Helper()
		if got := get(c); got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
}

// TestLoadProcessEnvironment covers Env == nil: the process environment is read.
// TestTemporalSource: a message about the Temporal connection names where its address came
// from, so the user knows what to change: the flag, the NEXO_* variable, the config
// file's key (and file), or the default; by Load's precedence.
func TestTemporalSource(t *testing.T) {
	const file = "temporal:\n  address: file.example:7233\n"
	tests := []struct {
		name string
		file string
		env  []string
		args []string
		want string
	}{
		{name: "default", want: "the default temporal.address"},
		{name: "env", env: []string{"NEXO_TEMPORAL_ADDRESS=env.example:7233"}, want: "env NEXO_TEMPORAL_ADDRESS"},
		{name: "env set to the default value", env: []string{"NEXO_TEMPORAL_ADDRESS=127.0.0.1:7233"}, want: "env NEXO_TEMPORAL_ADDRESS"},
		{name: "file", file: file, want: "temporal.address in nexo.yaml"},
		{name: "env beats file", file: file, env: []string{"NEXO_TEMPORAL_ADDRESS=env.example:7233"}, want: "env NEXO_TEMPORAL_ADDRESS"},
		{name: "flag beats env", file: file, env: []string{"NEXO_TEMPORAL_ADDRESS=env.example:7233"}, args: []string{"--address", "flag.example:7233"}, want: "flag --address"},
		{name: "empty env is unset", file: file, env: []string{"NEXO_TEMPORAL_ADDRESS="}, want: "temporal.address in nexo.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if tt.file != "" {
				writeFile(t, ".", DefaultFile, tt.file)
			}
			env := tt.env
			if env == nil {
				env = []string{}
			}
			c, err := Load(LoadOptions{Env: env, Flags: parsedFlags(t, tt.args, nil)})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Temporal.Source("temporal.address"); got != tt.want {
				t.Errorf("Source(temporal.address) = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadProcessEnvironment(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("NEXO_TEMPORAL_NAMESPACE", "from-process")
	t.Setenv("NEXO_ARTIFACTS_INLINE_LIMIT", "10")
	t.Setenv("NEXO_TEMPORAL_TLS_ENABLED", "true")
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Temporal.Namespace != "from-process" || c.Artifacts.InlineLimit != 10 || !c.Temporal.TLS.Enabled {
		t.Errorf("namespace, inline_limit, tls.enabled = %q, %d, %v; want from-process, 10, true",
			c.Temporal.Namespace, c.Artifacts.InlineLimit, c.Temporal.TLS.Enabled)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		opts  LoadOptions
		want  []string // substrings of the error
		is    error    // when set, errors.Is must hold
	}{
		{
			name:  "unknown key names the key and suggests the right one",
			files: map[string]string{DefaultFile: "temporal:\n  adress: x:1\n"},
			want:  []string{`unknown config key "temporal.adress"`, `did you mean "temporal.address"?`, `file "nexo.yaml"`},
			is:    ErrUnknownKey,
		},
		{
			name:  "every unknown key is listed",
			files: map[string]string{DefaultFile: "skillz:\n  path: x\nlog:\n  levl: debug\n"},
			want:  []string{`"skillz"`, `"log.levl"`},
			is:    ErrUnknownKey,
		},
		{
			name: "missing explicit file",
			opts: LoadOptions{File: "nope.yaml"},
			want: []string{`config file "nope.yaml"`},
			is:   fs.ErrNotExist,
		},
		{
			name: "missing file named by NEXO_CONFIG",
			opts: LoadOptions{Env: []string{"NEXO_CONFIG=gone.yaml"}},
			want: []string{`"gone.yaml" (from NEXO_CONFIG)`},
			is:   fs.ErrNotExist,
		},
		{
			name: "RequireFile without any file",
			opts: LoadOptions{RequireFile: true},
			want: []string{"no config file", "--config", "NEXO_CONFIG", "nexo.yaml"},
			is:   fs.ErrNotExist,
		},
		{
			name:  "bare number for a duration",
			files: map[string]string{DefaultFile: "sandbox:\n  shell_timeout: 120\n"},
			want:  []string{`sandbox.shell_timeout: bare number 120: want a duration with a unit`},
		},
		{
			name: "artifacts.retention that is no duration names the key",
			opts: LoadOptions{Env: []string{"NEXO_ARTIFACTS_RETENTION=forever"}},
			want: []string{`artifacts.retention: time: invalid duration`, `NEXO_ARTIFACTS_RETENTION`},
		},
		{
			name: "env value of the wrong type names the key",
			opts: LoadOptions{Env: []string{"NEXO_DEV_UI_PORT=eighty"}},
			want: []string{`dev.ui_port "eighty": want int (from NEXO_DEV_UI_PORT)`},
		},
		{
			name:  "file value of the wrong type names the key",
			files: map[string]string{DefaultFile: "dev:\n  frontend_port: [1, 2]\n"},
			want:  []string{`decode config file "nexo.yaml": dev.frontend_port [1 2]: want int`},
		},
		{
			name:  "scalar where a section belongs",
			files: map[string]string{DefaultFile: "temporal: localhost:7233\n"},
			want:  []string{"temporal: expected a map"},
		},
		{
			name:  "invalid value from the file is reported by Validate",
			files: map[string]string{DefaultFile: "temporal:\n  address: foo\n"},
			want:  []string{`invalid config file "nexo.yaml"`, `temporal.address "foo": want host:port`},
		},
		{
			name:  "malformed YAML",
			files: map[string]string{DefaultFile: "temporal: [unclosed\n"},
			want:  []string{`read config file "nexo.yaml"`},
		},
		{
			name:  "unsupported extension",
			files: map[string]string{"nexo.conf": "x"},
			opts:  LoadOptions{File: "nexo.conf"},
			want:  []string{`unsupported extension ".conf"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			for name, content := range tt.files {
				writeFile(t, dir, name, content)
			}
			if tt.opts.Env == nil {
				tt.opts.Env = []string{}
			}
			c, err := Load(tt.opts)
			if err == nil {
				t.Fatalf("Load = %+v, nil; want an error containing %q", c, tt.want)
			}
			t.Logf("error: %v", err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Errorf("Load returned %+v with its error, want the zero Config", c)
			}
		})
	}
}

func TestSlogLevel(t *testing.T) {
	tests := []struct {
		level string
		want  slog.Level
	}{
		{"debug", slog.LevelDebug},
		{"info", slog.LevelInfo},
		{"warn", slog.LevelWarn},
		{"error", slog.LevelError},
		{"ERROR", slog.LevelError},
		{"bogus", slog.LevelInfo},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			c := Defaults()
			c.Log.Level = tt.level
			if got := c.SlogLevel(); got != tt.want {
				t.Errorf("SlogLevel() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	c := Defaults()
	c.Log = Log{Level: "warn", Format: "json"}
	var buf bytes.Buffer
	log := c.NewLogger(&buf)
	log.Info("dropped")
	log.Warn("kept", "k", "v")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("want one JSON line at warn level, got %q: %v", buf.String(), err)
	}
	if line["msg"] != "kept" || line["k"] != "v" {
		t.Errorf("logged %v, want msg=kept k=v", line)
	}

	c.Log = Log{Level: "info", Format: "text"}
	buf.Reset()
	c.NewLogger(&buf).Info("hello")
	if !strings.Contains(buf.String(), "msg=hello") {
		t.Errorf("text logger wrote %q, want msg=hello", buf.String())
	}
}

func TestAPIKey(t *testing.T) {
	env := map[string]string{"MY_KEY": "secret"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name, keyEnv, want string
	}{
		{"no variable configured", "", ""},
		{"variable set", "MY_KEY", "secret"},
		{"variable unset", "OTHER", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			c.Temporal.APIKeyEnv = tt.keyEnv
			if got := c.APIKey(getenv); got != tt.want {
				t.Errorf("APIKey() = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("nil getenv reads the process environment", func(t *testing.T) {
		t.Setenv("NEXO_TEST_API_KEY", "from-process")
		c := Defaults()
		c.Temporal.APIKeyEnv = "NEXO_TEST_API_KEY"
		if got := c.Temporal.APIKey(nil); got != "from-process" {
			t.Errorf("APIKey(nil) = %q, want from-process", got)
		}
	})
}

func TestArtifactsLocalDir(t *testing.T) {
	tests := []struct {
		url    string
		dir    string
		wantOK bool
	}{
		{"file://.nexo/artifacts", ".nexo/artifacts", true},
		{"file:///var/nexo", "/var/nexo", true},
		{"data/artifacts", "data/artifacts", true},
		{"s3://bucket/prefix", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			dir, ok := Artifacts{URL: tt.url}.LocalDir()
			if dir != tt.dir || ok != tt.wantOK {
				t.Errorf("LocalDir() = %q, %v; want %q, %v", dir, ok, tt.dir, tt.wantOK)
			}
		})
	}
}

func TestBindFlagsHelpShowsDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	BindFlags(fs)
	for name, want := range map[string]string{
		FlagConfig: "", FlagAddress: "127.0.0.1:7233", FlagNamespace: "default",
		FlagTaskQueue: "nexo", FlagLogLevel: "info",
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("BindFlags did not define --%s", name)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, want)
		}
	}
	if u := fs.Lookup(FlagTaskQueue).Usage; !strings.Contains(u, "NEXO_TEMPORAL_TASK_QUEUE") {
		t.Errorf("--task-queue usage %q does not name its env var", u)
	}
}

// TestPackageDocListsEveryKey keeps the key/env table in the package doc in step with
// Config: a new field without a doc line fails here.
func TestPackageDocListsEveryKey(t *testing.T) {
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "package config")
	for key := range defaultValues() {
		if !strings.Contains(doc, "//\t"+key+" ") || !strings.Contains(doc, envName(key)) {
			t.Errorf("package doc does not list key %s with %s", key, envName(key))
		}
	}
}

// TestLoadGatewayTokens: tokens come from the file; their secrets never do.
func TestLoadGatewayTokens(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, DefaultFile, `
gateway:
  addr: 0.0.0.0:9000
  tokens:
    - {name: ci, token_env: NEXO_CI_TOKEN, scopes: [read, operate]}
    - {name: ada, token_env: ADA_TOKEN, scopes: [read, approve]}
`)
	c, err := Load(LoadOptions{Env: []string{"NEXO_GATEWAY_MAX_BODY_BYTES=4096", "NEXO_CI_TOKEN=s3cret"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Gateway{Addr: "0.0.0.0:9000", MaxBodyBytes: 4096, Tokens: []GatewayToken{
		{Name: "ci", TokenEnv: "NEXO_CI_TOKEN", Scopes: []string{"read", "operate"}},
		{Name: "ada", TokenEnv: "ADA_TOKEN", Scopes: []string{"read", "approve"}},
	}}
	if !reflect.DeepEqual(c.Gateway, want) {
		t.Errorf("gateway = %+v, want %+v", c.Gateway, want)
	}
	env := map[string]string{"NEXO_CI_TOKEN": "s3cret"}
	if got := c.Gateway.Tokens[0].Secret(func(k string) string { return env[k] }); got != "s3cret" {
		t.Errorf("Secret() = %q, want the value of NEXO_CI_TOKEN", got)
	}

	writeFile(t, dir, DefaultFile, "gateway:\n  tokens:\n    - {name: ci, token: s3cret, scopes: [read]}\n")
	if _, err := Load(LoadOptions{Env: []string{}}); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"gateway.tokens[0].token"`) {
		t.Errorf("Load with a literal token = %v, want an unknown-key error naming it", err)
	}
}

// TestLoadGatewayTokenLimits: agents and workflows load as lists of globs; a bad glob and
// an empty list are refused naming the field.
func TestLoadGatewayTokenLimits(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, DefaultFile, `
gateway:
  addr: 0.0.0.0:9000
  tokens:
    - {name: support, token_env: SUPPORT_TOKEN, scopes: [read, approve], agents: [support-*, triage], workflows: [AgentRun, Session]}
    - {name: ops, token_env: OPS_TOKEN, scopes: [read]}
`)
	c, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got := c.Gateway.Tokens
	if !reflect.DeepEqual(got[0].Agents, []string{"support-*", "triage"}) || !reflect.DeepEqual(got[0].Workflows, []string{"AgentRun", "Session"}) {
		t.Errorf("support limits = agents %q workflows %q, want [support-* triage] and [AgentRun Session]", got[0].Agents, got[0].Workflows)
	}
	if got[1].Agents != nil || got[1].Workflows != nil {
		t.Errorf("ops limits = %q %q, want none (all runs)", got[1].Agents, got[1].Workflows)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"agents: ['support-[']", `gateway.tokens[support].agents[0] "support-[": not a glob`},
		{"workflows: []", `gateway.tokens[support].workflows: an empty list matches nothing; leave the key out for all workflows`},
		{"agents: ['']", `gateway.tokens[support].agents[0] "": want a name or a glob`},
	} {
		writeFile(t, dir, DefaultFile, "gateway:\n  addr: 0.0.0.0:9000\n  tokens:\n    - {name: support, token_env: T, scopes: [read], "+tt.yaml+"}\n")
		if _, err := Load(LoadOptions{Env: []string{}}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load with %s = %v, want an error containing %q", tt.yaml, err, tt.want)
		}
	}
}

// TestLoadApprovalsNotify: receivers come from the file, their secrets never do, and an
// agent cannot name receivers of its own (the worker gives every agent approvals.notify).
func TestLoadApprovalsNotify(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, DefaultFile, `
approvals:
  notify:
    - {url: "https://hooks.example.com/nexo", secret_env: NEXO_NOTIFY_SECRET}
    - {url_env: NEXO_SLACK_URL, secret_env: NEXO_NOTIFY_SECRET}
`)
	c, err := Load(LoadOptions{Env: []string{"NEXO_NOTIFY_SECRET=s3cret"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []api.NotifyTarget{{URL: "https://hooks.example.com/nexo", SecretEnv: "NEXO_NOTIFY_SECRET"}, {URLEnv: "NEXO_SLACK_URL", SecretEnv: "NEXO_NOTIFY_SECRET"}}
	if !reflect.DeepEqual(c.Approvals.Notify, want) {
		t.Errorf("approvals.notify = %+v, want %+v", c.Approvals.Notify, want)
	}

	writeFile(t, dir, DefaultFile, "approvals:\n  notify:\n    - {url: \"https://hooks.example.com/nexo\", secret: s3cret}\n")
	if _, err := Load(LoadOptions{Env: []string{}}); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"approvals.notify[0].secret"`) {
		t.Errorf("Load with a literal secret = %v, want an unknown-key error naming it", err)
	}
}

// TestLoadApprovalsNotifyAddresses: a receiver on a loopback or private address is refused
// at load, naming approvals.notify[i].url, unless it says allow_private: true (docs/approvals.md's
// internal receiver loads as printed); link-local and metadata addresses are refused even
// then; and a password in the URL is not repeated in the error.
func TestLoadApprovalsNotifyAddresses(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "approvals.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	var block string
	for _, blk := range strings.Split(string(readme), "```yaml\n")[1:] {
		if blk, _, _ = strings.Cut(blk, "```"); strings.Contains(blk, "allow_private: true") {
			block = blk
			break
		}
	}
	if block == "" {
		t.Fatal("docs/approvals.md has no ```yaml block with an allow_private receiver")
	}
	writeFile(t, dir, DefaultFile, block)
	c, err := Load(LoadOptions{Env: []string{"NOTIFY_SECRET=s3cret"}})
	if err != nil {
		t.Fatalf("Load of the internal receiver of docs/approvals.md: %v", err)
	}
	if len(c.Approvals.Notify) == 0 || !c.Approvals.Notify[len(c.Approvals.Notify)-1].AllowPrivate {
		t.Errorf("approvals.notify = %+v, want the last receiver with AllowPrivate", c.Approvals.Notify)
	}

	for _, tc := range []struct{ receivers, want string }{
		{`{url: "http://10.255.255.1/hook", secret_env: S}`, `approvals.notify[0].url "http://10.255.255.1/hook": a loopback or private address is refused: if the receiver is yours, say allow_private: true on it`},
		{`{url: "https://hooks.example.com/x", secret_env: S}, {url: "http://localhost:9000/hook", secret_env: S}`, `approvals.notify[1].url "http://localhost:9000/hook": a loopback or private address`},
		{`{url: "http://[::1]:9000/hook", secret_env: S}`, `approvals.notify[0].url "http://[::1]:9000/hook": a loopback or private address`},
		{`{url: "http://169.254.169.254/latest", secret_env: S, allow_private: true}`, `approvals.notify[0].url "http://169.254.169.254/latest": a link-local or cloud metadata address is never a receiver (refused even with allow_private)`},
		{`{url: "http://[fd00:ec2::254]/latest", secret_env: S, allow_private: true}`, `approvals.notify[0].url "http://[fd00:ec2::254]/latest": a link-local or cloud metadata address`},
		{`{url: "http://ada:hunter2@10.0.0.5/hook", secret_env: S}`, `approvals.notify[0].url "http://ada:xxxxx@10.0.0.5/hook": a loopback or private address`},
		{`{url: "http://10.0.0.5/hook", secret_env: S, allowPrivate: true}`, `"approvals.notify[0].allowprivate"`},
	} {
		writeFile(t, dir, DefaultFile, "approvals:\n  notify: ["+tc.receivers+"]\n")
		_, err := Load(LoadOptions{Env: []string{"S=x"}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Load with %s = %v, want an error with %s", tc.receivers, err, tc.want)
		}
	}
	writeFile(t, dir, DefaultFile, "approvals:\n  notify: [{url: \"http://127.0.0.1:9000/hook\", secret_env: S, allow_private: true}]\n")
	if _, err := Load(LoadOptions{Env: []string{"S=x"}}); err != nil {
		t.Errorf("Load of a loopback receiver with allow_private: %v", err)
	}
}
