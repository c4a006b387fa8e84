//go:build !unix

package activities

import "os/exec"

func setProcessGroup(*exec.Cmd) {}
func killGroup(int)             {}
