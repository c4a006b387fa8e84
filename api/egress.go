package api

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// EgressSpec is an agent's way out of a sealed sandbox: the sandbox keeps no network of
// its own, and its commands reach the hosts Allow lists through a proxy the worker runs
// (HTTP_PROXY / HTTPS_PROXY inside the sandbox). Inject adds a header holding a secret to
// the requests to a host, so the secret never enters the sandbox. The spec travels in
// workflow input: it names the variables holding secrets, never their values.
type EgressSpec struct {
	// Allow lists the hosts a command may reach: "HOST" (ports 80 and 443), "HOST:PORT"
	// (that port only) or "*.DOMAIN" (its subdomains, not DOMAIN itself; ports 80 and 443,
	// or "*.DOMAIN:PORT"). A name that resolves to a loopback, private or reserved address
	// is refused unless the entry names that exact address (an IP literal); link-local and
	// cloud metadata addresses are refused always.
	Allow []string `json:"allow,omitempty" mapstructure:"allow" yaml:"allow"`
	// Inject adds headers to the requests to allowed hosts.
	Inject []EgressInject `json:"inject,omitempty" mapstructure:"inject" yaml:"inject"`
	// Agent names the agent in the proxy's refusals; the worker fills it from the agent's
	// name (not a key of the config).
	Agent string `json:"agent,omitempty" mapstructure:"-" yaml:"-"`
}

// EgressInject is one header the egress proxy adds to every request to Host. An HTTPS
// request to Host is decrypted by the proxy with the worker's own CA, which the sandbox
// trusts, and sent on to Host over TLS verified against the system's roots.
type EgressInject struct {
	// Host is a host name or address an Allow entry admits (no port: every allowed port).
	Host string `json:"host" mapstructure:"host" yaml:"host"`
	// Header is the header's name ("Authorization"); the proxy replaces any value the
	// command sent.
	Header string `json:"header" mapstructure:"header" yaml:"header"`
	// ValueEnv names the worker's environment variable holding the secret; the worker reads
	// it at start and removes it from its environment.
	ValueEnv string `json:"value_env" mapstructure:"value_env" yaml:"value_env"`
	// Format is the header's value with {} standing for the secret ("Bearer {}"); empty
	// means the secret as is.
	Format string `json:"format,omitempty" mapstructure:"format" yaml:"format"`
}

// EgressRecord is one request a sandbox's command made through the egress proxy, as the
// run's `egress` event shows it: never a header or a body.
type EgressRecord struct {
	Host   string `json:"host"`
	Port   int    `json:"port,omitempty"`
	Method string `json:"method"` // CONNECT for a tunnel the proxy did not open
	// Status is the HTTP status the command got (200 for an opened tunnel, 403 refused).
	Status    int   `json:"status"`
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
	// Denied says why the proxy refused the request; empty when it went through.
	Denied string `json:"denied,omitempty"`
	// Error says why a request the policy allowed failed (the upstream could not be
	// reached, a TLS handshake failed).
	Error string `json:"error,omitempty"`
	// Injected names the header the proxy added (its name only).
	Injected string `json:"injected,omitempty"`
}

// MaxEgressRecords bounds the egress events one tool call adds to the run's record; the
// rest are counted (RunToolResult.EgressDropped).
const MaxEgressRecords = 100

// EgressRule is one parsed Allow entry.
type EgressRule struct {
	// Host is the host name (lower case) or IP address; for a wildcard, the domain.
	Host string
	// Wildcard: the rule admits the subdomains of Host.
	Wildcard bool
	// Port is the one port the rule admits; 0 means 80 and 443.
	Port int
	// IP is set when Host is an address literal.
	IP net.IP
}

// Admits reports whether the rule lets a connection to host:port through (host lower case,
// without brackets).
func (r EgressRule) Admits(host string, port int) bool {
	if r.Port == 0 {
		if port != 80 && port != 443 {
			return false
		}
	} else if port != r.Port {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Host)
	}
	if r.IP != nil {
		ip := net.ParseIP(host)
		return ip != nil && ip.Equal(r.IP)
	}
	return host == r.Host
}

// CoversHost reports whether the rule admits host on some port.
func (r EgressRule) CoversHost(host string) bool {
	if r.Port != 0 {
		return r.Admits(host, r.Port)
	}
	return r.Admits(host, 443)
}

// awsMetadataV6 is AWS's IPv6 instance metadata address (fd00:ec2::254).
var awsMetadataV6 = net.ParseIP("fd00:ec2::254")

// ParseEgressRule reads an Allow entry, or says what is wrong with it.
func ParseEgressRule(entry string) (EgressRule, error) {
	e := strings.TrimSpace(entry)
	switch {
	case e == "":
		return EgressRule{}, fmt.Errorf("is empty")
	case e == "*" || strings.HasPrefix(e, "*:"):
		return EgressRule{}, fmt.Errorf("%q would allow every host; list the hosts (or *.domain)", entry)
	case strings.Contains(e, "://") || strings.ContainsAny(e, "/?#@ \t"):
		return EgressRule{}, fmt.Errorf("%q is not a host (want HOST, HOST:PORT or *.DOMAIN: no scheme, path or user)", entry)
	}
	var r EgressRule
	host := e
	if h, p, err := net.SplitHostPort(e); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return EgressRule{}, fmt.Errorf("%q: port %q is not between 1 and 65535", entry, p)
		}
		host, r.Port = h, n
	} else if strings.HasPrefix(e, "[") || strings.Count(e, ":") == 1 {
		return EgressRule{}, fmt.Errorf("%q is not a host (want HOST, HOST:PORT or *.DOMAIN): %v", entry, err)
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.Equal(awsMetadataV6) {
			return EgressRule{}, fmt.Errorf("%q is a link-local or cloud metadata address, which the egress proxy never reaches", entry)
		}
		r.Host, r.IP = ip.String(), ip
		return r, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if !strings.Contains(rest, ".") {
			return EgressRule{}, fmt.Errorf("%q is a wildcard over a top-level domain; name a domain (*.example.com)", entry)
		}
		host, r.Wildcard = rest, true
	}
	if !validHostName(host) {
		return EgressRule{}, fmt.Errorf("%q is not a host (want HOST, HOST:PORT or *.DOMAIN; a * only as the first label)", entry)
	}
	r.Host = host
	return r, nil
}

// validHostName: letters, digits, - and _ in dot-separated labels of 1..63 characters.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return false
		}
		if strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return false
		}
	}
	return true
}

// forbiddenInjectHeaders are headers the proxy itself owns: injecting them would break
// the request or the proxy's own routing.
var forbiddenInjectHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive",
	"proxy-authorization", "proxy-connection", "proxy-authenticate"}

// Validate reports every problem of the spec, each naming its field under prefix
// ("sandbox.egress"). It does not look at the environment: whether each value_env is set
// is the worker's check at start.
func (e *EgressSpec) Validate(prefix string) []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s%s: %s", prefix, field, fmt.Sprintf(format, a...)))
	}
	if len(e.Allow) == 0 {
		bad(".allow", "is empty: list the hosts the sandbox may reach (or leave egress out for no network)")
	}
	rules := make([]EgressRule, 0, len(e.Allow))
	for i, a := range e.Allow {
		r, err := ParseEgressRule(a)
		if err != nil {
			bad(fmt.Sprintf(".allow[%d]", i), "%v", err)
			continue
		}
		rules = append(rules, r)
	}
	for i, in := range e.Inject {
		f := fmt.Sprintf(".inject[%d]", i)
		host := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(in.Host), "."))
		if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
			host = ip.String()
		}
		switch {
		case host == "":
			bad(f+".host", "is empty")
		case strings.ContainsAny(host, ":/*@ "):
			bad(f+".host", "%q is not a host name or address (no port, scheme or wildcard: the header goes to every allowed port of the host)", in.Host)
		default:
			covered := false
			for _, r := range rules {
				if r.CoversHost(host) {
					covered = true
					break
				}
			}
			if !covered {
				bad(f+".host", "%q is not allowed by sandbox.egress.allow; a header is only added to a host the sandbox may reach", in.Host)
			}
		}
		switch h := strings.TrimSpace(in.Header); {
		case h == "":
			bad(f+".header", "is empty")
		case strings.Trim(strings.ToLower(h), "abcdefghijklmnopqrstuvwxyz0123456789-_!#$%&'*+.^`|~") != "":
			bad(f+".header", "%q is not a header name", in.Header)
		default:
			for _, x := range forbiddenInjectHeaders {
				if strings.EqualFold(h, x) {
					bad(f+".header", "%q is a header the proxy owns and cannot be injected", in.Header)
				}
			}
		}
		if in.ValueEnv == "" {
			bad(f+".value_env", "is empty: name the worker's environment variable holding the secret")
		} else if strings.ContainsAny(in.ValueEnv, "= \x00") {
			bad(f+".value_env", "%q is not an environment variable name", in.ValueEnv)
		}
		if n := strings.Count(in.Format, "{}"); in.Format != "" && n != 1 {
			bad(f+".format", "%q must hold {} exactly once, where the secret goes (\"Bearer {}\")", in.Format)
		}
		if strings.ContainsAny(in.Format, "\r\n\x00") {
			bad(f+".format", "holds a line break")
		}
	}
	return errs
}

// EgressHeaderValue is the header value of in for the secret.
func EgressHeaderValue(in EgressInject, secret string) string {
	if in.Format == "" {
		return secret
	}
	return strings.Replace(in.Format, "{}", secret, 1)
}
