// Package netguard tells public addresses from the ones a request made on a user's behalf
// must not reach (loopback, private, link-local and cloud metadata, CGNAT, reserved), and
// gives a dialer Control that enforces it on the address actually dialled, after DNS
// resolution, so a name that resolves (or rebinds) to an internal address is refused too.
// The fetch tool and approval notifications share it.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// ErrBlocked is the error of a dial to an address the guard refuses.
var ErrBlocked = errors.New("address refused")

var blockedNets = parseNets(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8", "64:ff9b::/96", "64:ff9b:1::/48", "2001:db8::/32",
)

// metadataNets are refused even where private addresses are allowed: link-local (where
// cloud instance metadata answers, 169.254.169.254, with the instance's credentials) and
// AWS's IPv6 metadata address.
var metadataNets = parseNets("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128")

func parseNets(cidrs ...string) []*net.IPNet {
	out := make([]*net.IPNet, 0, len(cidrs))
	for _, c := range cidrs {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			panic(err)
		}
		out = append(out, n)
	}
	return out
}

func in(nets []*net.IPNet, ip net.IP) bool {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// Public reports whether ip is a public unicast address.
func Public(ip net.IP) bool {
	if ip == nil || in(blockedNets, ip) {
		return false
	}
	return !ip.IsLoopback() && !ip.IsPrivate() && !ip.IsUnspecified() && !ip.IsLinkLocalUnicast() &&
		!ip.IsLinkLocalMulticast() && !ip.IsMulticast()
}

// Metadata reports whether ip is link-local or a cloud metadata address: never reachable
// through the guard, whatever it allows.
func Metadata(ip net.IP) bool {
	return ip != nil && (in(metadataNets, ip) || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast())
}

// Check is nil when the guard lets a connection to ip through: a public address, or with
// allowPrivate any address but a link-local or metadata one.
func Check(ip net.IP, allowPrivate bool) error {
	switch {
	case ip == nil:
		return fmt.Errorf("%w: not an IP address", ErrBlocked)
	case Metadata(ip):
		return fmt.Errorf("%w: %s is link-local or a cloud metadata address, never reached", ErrBlocked, ip)
	case !allowPrivate && !Public(ip):
		return fmt.Errorf("%w: %s is a loopback, private or reserved address", ErrBlocked, ip)
	}
	return nil
}

// Control is a net.Dialer Control that refuses a connection Check refuses. It sees the
// address the dialer is about to connect to, after resolution.
func Control(allowPrivate bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBlocked, address, err)
		}
		return Check(net.ParseIP(host), allowPrivate)
	}
}
