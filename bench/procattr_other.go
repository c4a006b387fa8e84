//go:build !linux

package main

import "syscall"

// childProcAttr has no parent-death signal to offer outside Linux; the bench stops its
// children itself on every path but a hard kill.
func childProcAttr() *syscall.SysProcAttr { return nil }
