package netguard

import (
	"errors"
	"net"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		ip           string
		allowPrivate bool
		ok           bool
	}{
		{"93.184.216.34", false, true},
		{"2606:2800:220:1:248:1893:25c8:1946", false, true},
		{"127.0.0.1", false, false},
		{"127.0.0.1", true, true},
		{"10.255.255.1", false, false},
		{"10.255.255.1", true, true},
		{"192.168.1.2", true, true},
		{"::1", false, false},
		{"::1", true, true},
		{"169.254.169.254", false, false},
		{"169.254.169.254", true, false},
		{"fd00:ec2::254", true, false},
		{"fe80::1", true, false},
		{"::ffff:169.254.169.254", true, false},
		{"100.64.0.1", false, false},
	}
	for _, tt := range tests {
		err := Check(net.ParseIP(tt.ip), tt.allowPrivate)
		if (err == nil) != tt.ok {
			t.Errorf("Check(%s, allowPrivate=%v) = %v, want ok=%v", tt.ip, tt.allowPrivate, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBlocked) {
			t.Errorf("Check(%s) = %v, want ErrBlocked", tt.ip, err)
		}
	}
}

func TestControl(t *testing.T) {
	if err := Control(true)("tcp4", "169.254.169.254:80", nil); !errors.Is(err, ErrBlocked) {
		t.Errorf("Control(allowPrivate) on the metadata address = %v, want ErrBlocked", err)
	}
	if err := Control(false)("tcp4", "127.0.0.1:8080", nil); !errors.Is(err, ErrBlocked) {
		t.Errorf("Control on loopback = %v, want ErrBlocked", err)
	}
	if err := Control(true)("tcp4", "127.0.0.1:8080", nil); err != nil {
		t.Errorf("Control(allowPrivate) on loopback = %v, want nil", err)
	}
}
