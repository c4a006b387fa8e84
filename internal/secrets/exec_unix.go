//go:build unix

package secrets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

const canReexec = true

// reexec replaces the program with a fresh image of itself whose environment lacks the
// names in drop, writing m to a pipe the new image inherits.
func reexec(m map[string]string, drop []string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > maxHandoff {
		return fmt.Errorf("the secrets take %d bytes, over the %d that can be handed over", len(b), maxHandoff)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	_, werr := w.Write(b) // fits the pipe's buffer: nobody reads until after the exec
	w.Close()
	if werr != nil {
		return werr
	}
	// The read end must survive the exec (os.Pipe marks it close-on-exec).
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), syscall.F_SETFD, 0); errno != 0 {
		return errno
	}
	env := []string{handoffEnv + "=" + strconv.Itoa(int(r.Fd()))}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != handoffEnv && !slices.Contains(drop, name) {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(exe, os.Args, env)
	return errors.Join(errors.New("re-execute "+exe), err)
}
