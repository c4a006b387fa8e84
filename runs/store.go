package runs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// DescribeStore describes the artifact store at rawURL (artifacts.url) as the worker
// announces it: without userinfo or query (which may hold credentials), a file:// store
// (or a plain directory) by its absolute path (a relative one resolves against the
// working directory, as artifacts.Open does) on this machine, a mem:// store as this
// process's own.
func DescribeStore(rawURL, identity string) (api.StoreAnnouncement, error) {
	host, _ := os.Hostname()
	dir := ""
	if !strings.Contains(rawURL, "://") {
		dir = rawURL
	} else {
		u, err := url.Parse(rawURL)
		if err != nil {
			return api.StoreAnnouncement{}, fmt.Errorf("describe artifact store: artifacts.url: %w", err)
		}
		switch u.Scheme {
		case "file":
			dir = u.Host + u.Path // file://.nexo/artifacts puts ".nexo" in Host
		case "mem":
			return api.StoreAnnouncement{URL: "mem://", Scheme: "mem", Host: host, MachineID: identity}, nil
		default:
			u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
			return api.StoreAnnouncement{URL: u.String(), Scheme: u.Scheme}, nil
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return api.StoreAnnouncement{}, fmt.Errorf("describe artifact store: resolve artifacts.url %s: %w", dir, err)
	}
	return api.StoreAnnouncement{URL: (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), Scheme: "file",
		Host: host, MachineID: machineID()}, nil
}

// machineID is this machine's id (systemd's /etc/machine-id, or D-Bus's), "" when there
// is none: then the hostname alone tells machines apart.
func machineID() string {
	for _, f := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(f); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" {
				return id
			}
		}
	}
	return ""
}
