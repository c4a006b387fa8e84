package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// ports is what a user sees of the settings the port base moves.
type ports struct {
	frontend, ui  int
	gateway, dial string
	dialGiven     bool
	fromBase      []string
	pageURL       string
}

func portsOf(c Config) ports {
	p := ports{frontend: c.Dev.FrontendPort, ui: c.Dev.UIPort, gateway: c.Gateway.Addr,
		dial: c.Temporal.Address, dialGiven: c.Temporal.Given("temporal.address"), pageURL: c.Gateway.PageURL()}
	for _, k := range []string{"dev.frontend_port", "dev.ui_port", "gateway.addr", "temporal.address"} {
		if c.FromPortBase(k) {
			p.fromBase = append(p.fromBase, k)
		}
	}
	return p
}

// TestLoadPortBase: NEXO_PORT_BASE (or port_base in the file, or a flag) moves the
// frontend to the base, the UI to base+1000, the gateway to base+1001 and the address the
// starter dials to the base; a port set on its own wins; no base is exactly today's ports.
func TestLoadPortBase(t *testing.T) {
	all := []string{"dev.frontend_port", "dev.ui_port", "gateway.addr", "temporal.address"}
	tests := []struct {
		name  string
		file  string
		env   []string
		flags []string
		want  ports
	}{
		{
			name: "no base: the ports every example uses",
			want: ports{7233, 8233, "127.0.0.1:8234", "127.0.0.1:7233", false, nil, "http://127.0.0.1:8234"},
		},
		{
			name: "NEXO_PORT_BASE moves all three and the starter's address",
			env:  []string{"NEXO_PORT_BASE=17233"},
			want: ports{17233, 18233, "127.0.0.1:18234", "127.0.0.1:17233", true, all, "http://127.0.0.1:18234"},
		},
		{
			name: "NEXO_PORT_BASE at the default moves nothing but says so",
			env:  []string{"NEXO_PORT_BASE=7233"},
			want: ports{7233, 8233, "127.0.0.1:8234", "127.0.0.1:7233", false, all, "http://127.0.0.1:8234"},
		},
		{
			name: "port_base in the file",
			file: "port_base: 20000\n",
			want: ports{20000, 21000, "127.0.0.1:21001", "127.0.0.1:20000", true, all, "http://127.0.0.1:21001"},
		},
		{
			name:  "port_base as a flag",
			flags: []string{"--port_base=30000"},
			want:  ports{30000, 31000, "127.0.0.1:31001", "127.0.0.1:30000", true, all, "http://127.0.0.1:31001"},
		},
		{
			name: "explicit ports win over the base, even at their defaults",
			env:  []string{"NEXO_PORT_BASE=17233", "NEXO_DEV_UI_PORT=9999", "NEXO_GATEWAY_ADDR=127.0.0.1:8234"},
			file: "dev:\n  frontend_port: 7233\n",
			want: ports{7233, 9999, "127.0.0.1:8234", "127.0.0.1:17233", true, []string{"temporal.address"}, "http://127.0.0.1:8234"},
		},
		{
			name:  "an explicit address wins over the base (--address)",
			env:   []string{"NEXO_PORT_BASE=17233"},
			flags: []string{"--address=temporal.example:7233"},
			want:  ports{17233, 18233, "127.0.0.1:18234", "temporal.example:7233", true, []string{"dev.frontend_port", "dev.ui_port", "gateway.addr"}, "http://127.0.0.1:18234"},
		},
		{
			name: "gateway.url still names the page",
			env:  []string{"NEXO_PORT_BASE=17233", "NEXO_GATEWAY_URL=https://nexo.example.com"},
			want: ports{17233, 18233, "127.0.0.1:18234", "127.0.0.1:17233", true, all, "https://nexo.example.com"},
		},
		{
			name: "the highest base",
			env:  []string{"NEXO_PORT_BASE=64534"},
			want: ports{64534, 65534, "127.0.0.1:65535", "127.0.0.1:64534", true, all, "http://127.0.0.1:65535"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			if tt.file != "" {
				writeFile(t, dir, DefaultFile, tt.file)
			}
			env := tt.env
			if env == nil {
				env = []string{}
			}
			fs := parsedFlags(t, tt.flags, func(fs *pflag.FlagSet) { fs.Int("port_base", 0, "") })
			c, err := Load(LoadOptions{Env: env, Flags: fs})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := portsOf(c); !equalPorts(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func equalPorts(a, b ports) bool {
	return a.frontend == b.frontend && a.ui == b.ui && a.gateway == b.gateway && a.dial == b.dial &&
		a.dialGiven == b.dialGiven && a.pageURL == b.pageURL && strings.Join(a.fromBase, ",") == strings.Join(b.fromBase, ",")
}

// TestLoadPortBaseRefused: a base whose ports are not all ports is refused at load with
// an error naming NEXO_PORT_BASE (and only it: the ports it would have moved stay put).
func TestLoadPortBaseRefused(t *testing.T) {
	tests := []struct {
		env  string
		want []string
	}{
		{"NEXO_PORT_BASE=64535", []string{"port_base 64535: want 1-64534", "base+1001", "NEXO_PORT_BASE"}},
		{"NEXO_PORT_BASE=70000", []string{"port_base 70000: want 1-64534", "NEXO_PORT_BASE"}},
		{"NEXO_PORT_BASE=-5", []string{"port_base -5: want 1-64534", "NEXO_PORT_BASE"}},
		{"NEXO_PORT_BASE=high", []string{`port_base "high": want int (from NEXO_PORT_BASE)`}},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Chdir(t.TempDir())
			_, err := Load(LoadOptions{Env: []string{tt.env}})
			if err == nil {
				t.Fatalf("Load with %s = nil error, want one", tt.env)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			for _, other := range []string{"dev.frontend_port", "dev.ui_port", "gateway.addr"} {
				if strings.Contains(err.Error(), other) {
					t.Errorf("error %q also blames %s, which the user did not set", err, other)
				}
			}
			var fe *FieldError
			if !strings.Contains(tt.env, "high") && (!errors.As(err, &fe) || fe.Field != PortBaseKey) {
				t.Errorf("error %v is no FieldError for %s", err, PortBaseKey)
			}
		})
	}
}
