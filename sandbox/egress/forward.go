package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
)

// ForwarderName is the name the worker's executable answers to as the forwarder inside a
// sandbox: run under that name (argv[0]), any binary that links this package becomes
//
//	nexo-egress-forward PORT SOCKET TOKENFD -- COMMAND [ARG...]
//
// which reads the session's token from descriptor TOKENFD (a pipe the worker wrote it
// to), makes itself non-dumpable, listens on 127.0.0.1:PORT, relays every connection
// made there to the unix socket SOCKET (the session's, bound into the sandbox) after the
// token line, runs COMMAND, and exits with its status. The sandbox has no network of its
// own: this is its only way out. The token keeps other processes of the worker's user
// (a local-tier command) from using a session's socket, and its credentials, as their
// own: it never is in an argument, an environment or a file.
const ForwarderName = "nexo-egress-forward"

// ForwardPort is the port the forwarder listens on inside a sandbox (its own network
// namespace, so every sandbox can use the same).
const ForwardPort = 3128

// The forwarder runs before anything else of the program: it needs none of it, and a
// sandbox's command waits for it to start.
func init() {
	if filepath.Base(os.Args[0]) == ForwarderName {
		os.Exit(forwardMain(os.Args[1:], os.Stderr))
	}
}

// forwardMain is the forwarder; it returns the exit status.
func forwardMain(args []string, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, ForwarderName+": "+format+"\n", a...)
		return 127
	}
	if len(args) < 5 || args[3] != "--" {
		return fail("usage: %s PORT SOCKET TOKENFD -- COMMAND [ARG...]", ForwarderName)
	}
	port, err := strconv.Atoi(args[0])
	if err != nil || port < 1 || port > 65535 {
		return fail("port %q is not between 1 and 65535", args[0])
	}
	fd, err := strconv.Atoi(args[2])
	if err != nil || fd < 3 {
		return fail("token descriptor %q is not a descriptor above 2", args[2])
	}
	nonDumpable()
	tf := os.NewFile(uintptr(fd), "token")
	tok, err := io.ReadAll(io.LimitReader(tf, tokenMax+1))
	tf.Close() // the command must not inherit it
	if err != nil || len(tok) == 0 || len(tok) > tokenMax {
		return fail("read the session token from descriptor %d: %v", fd, err)
	}
	sock, argv := args[1], args[4:]
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fail("listen for the sandbox's proxy: %v", err)
	}
	defer ln.Close()
	go relay(ln, sock, append(tok, '\n'))

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The command gets the forwarder's environment (the sandbox's), nothing more.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		return fail("run %s: %v", argv[0], err)
	}
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	return fail("%v", err)
}

// relay accepts the sandbox's connections and splices each to a fresh connection to the
// proxy's socket.
func relay(ln net.Listener, sock string, token []byte) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer u.Close()
			if _, err := u.Write(token); err != nil {
				return
			}
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(u, c)
				closeWrite(u)
				close(done)
			}()
			_, _ = io.Copy(c, u)
			closeWrite(c)
			<-done
		}()
	}
}

// Executable is the program the sandbox runs as its forwarder: this process's own
// executable, resolved (a bind mount needs the file, not a link to it).
func Executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the worker's executable for the egress forwarder: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe, nil
}
