// Package secrets keeps the worker's secrets (model key, gateway tokens, MCP tokens,
// search and Temporal API keys) out of its environment once it has started.
//
// The configuration names each secret by the environment variable that holds it. A
// command the local sandbox runs gets a cleared environment, but it runs as the worker's
// user and could read the worker's own, through /proc/<worker pid>/environ. Unsetting
// the variables is not enough: that file shows the environment the process was started
// with, whatever it unsets later. So Take reads the secrets into memory, and on unix
// starts the program afresh (execve, same pid) with an environment that no longer holds
// them, handing their values over through a pipe.
package secrets

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
)

// handoffEnv names the descriptor of the pipe a re-executed program reads its secrets from.
const handoffEnv = "NEXO_SECRETS_FD"

// maxHandoff bounds the secrets handed over: they go through a pipe written before the
// exec, so they must fit its buffer (64 KiB on Linux, 16 KiB at least elsewhere).
const maxHandoff = 16 << 10

// Env is the secrets' values, in memory only. Its methods answer for the variables Take
// removed and fall back to the process environment for any other name. Safe for
// concurrent use (read-only after Take).
type Env struct{ m map[string]string }

// Getenv is os.Getenv over the secrets first.
func (e *Env) Getenv(name string) string {
	v, _ := e.LookupEnv(name)
	return v
}

// LookupEnv is os.LookupEnv over the secrets first.
func (e *Env) LookupEnv(name string) (string, bool) {
	if e != nil {
		if v, ok := e.m[name]; ok {
			return v, true
		}
	}
	return os.LookupEnv(name)
}

// Take moves the variables names lists (empty names are skipped) from the environment into
// memory. When one of them is set and the platform can, it re-executes the program with
// them removed (see the package doc) and does not return: the new image calls Take again
// and gets the values back from the pipe. Whatever else happens, the variables are unset
// and the process is made unreadable to its user's other processes where the OS allows
// (Linux: not dumpable, so /proc/<pid>/environ and mem are closed to them).
func Take(names []string) (*Env, error) {
	e := &Env{m: map[string]string{}}
	if err := e.receive(); err != nil {
		return nil, err
	}
	var present []string
	for _, n := range names {
		if n == "" {
			continue
		}
		if v, ok := os.LookupEnv(n); ok {
			if _, dup := e.m[n]; !dup {
				present = append(present, n)
			}
			e.m[n] = v
		}
	}
	if len(present) > 0 && canReexec {
		if err := reexec(e.m, present); err != nil {
			return nil, fmt.Errorf("keep secrets out of the environment: %w", err)
		}
	}
	for _, n := range present {
		os.Unsetenv(n)
	}
	protect()
	return e, nil
}

// receive reads the secrets an earlier image of the program handed over, if any.
func (e *Env) receive() error {
	s, ok := os.LookupEnv(handoffEnv)
	if !ok {
		return nil
	}
	os.Unsetenv(handoffEnv)
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 3 {
		return fmt.Errorf("read secrets: %s=%q is not a descriptor", handoffEnv, s)
	}
	f := os.NewFile(uintptr(fd), "secrets")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHandoff+1))
	if err != nil {
		return fmt.Errorf("read secrets: %w", err)
	}
	if err := json.Unmarshal(b, &e.m); err != nil {
		return fmt.Errorf("read secrets: %w", err)
	}
	return nil
}
