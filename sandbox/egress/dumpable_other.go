//go:build !linux

package egress

// nonDumpable has nothing to do where the sandbox tiers that run the forwarder do not run.
func nonDumpable() {}
