package main

import "syscall"

// childProcAttr makes a child die with the bench (the parent-death signal), so an interrupted
// bench leaves no server behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
