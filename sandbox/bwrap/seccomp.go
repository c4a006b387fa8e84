package bwrap

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// deniedSyscalls fail with EPERM inside the sandbox: kernel surfaces an unprivileged
// process can still reach from a user namespace and that no build, test or script
// needs, after Docker's default profile. Most of the rest of that profile is already
// refused for want of capabilities (every one is dropped) or by --disable-userns.
var deniedSyscalls = []string{
	// Kernel keyrings are not namespaced: keys of the worker's user would be reachable.
	"add_key", "keyctl", "request_key",
	// Exploit primitives and large attack surfaces.
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	// Mounts, namespaces and file handles (refused for want of capabilities too).
	"mount", "umount2", "pivot_root", "setns", "open_by_handle_at", "name_to_handle_at",
	"fsopen", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	// The machine's own state.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
	"swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"syslog", "quotactl", "lookup_dcookie",
}

// filterProgram is the compiled filter (struct sock_filter[] in the host's byte order,
// what bwrap --seccomp reads), built once.
var filterProgram = sync.OnceValues(compileFilter)

// compileFilter assembles deniedSyscalls for the host's architecture with
// github.com/elastic/go-seccomp-bpf (pure Go: no libseccomp, no cgo). Names the host's
// table lacks are left out. A system call made with another architecture's ABI (i386
// int 0x80 on x86_64), which a list for the host's would not see, fails with ENOSYS.
func compileFilter() ([]byte, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	var names []string
	for _, n := range deniedSyscalls {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Names: names, Action: seccomp.ActionErrno}},
	}
	prog, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	const (
		archOffset = 4 // struct seccomp_data: int nr; __u32 arch; ...
		enosys     = 38
	)
	foreign := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | enosys},
	}
	raw, err := bpf.Assemble(append(foreign, prog...))
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// filterFile is a pipe holding the compiled filter, for bwrap to read as --seccomp FD.
// The filter (a few hundred bytes) fits the pipe's buffer, so the write does not block.
func filterFile() (*os.File, error) {
	prog, err := filterProgram()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	_, err = w.Write(prog)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	return r, nil
}
