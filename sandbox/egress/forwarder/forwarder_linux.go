package forwarder

import "syscall"

// tokenMax bounds the token read from the pipe.
const tokenMax = 128

func init() {
	argv := cmdline()
	if len(argv) == 0 || base(argv[0]) != Name {
		return
	}
	syscall.Exit(run(argv[1:]))
}

// cmdline reads this process's arguments from /proc/self/cmdline (os.Args is not set
// yet when this package initialises).
func cmdline() []string {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := syscall.Read(fd, chunk)
		if n > 0 {
			buf = append(buf, chunk[:n]...)
		}
		if n <= 0 || err != nil {
			break
		}
	}
	var out []string
	start := 0
	for i, b := range buf {
		if b == 0 {
			out = append(out, string(buf[start:i]))
			start = i + 1
		}
	}
	return out
}

func base(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

func atoi(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// fail writes the forwarder's own error to stderr and returns 127, as a shell does for
// a command it cannot run.
func fail(msg string) int {
	_, _ = syscall.Write(2, []byte(Name+": "+msg+"\n"))
	return 127
}

// run is the forwarder; it returns the exit status.
func run(args []string) int {
	if len(args) < 5 || args[3] != "--" {
		return fail("usage: " + Name + " PORT SOCKET TOKENFD -- COMMAND [ARG...]")
	}
	port, ok := atoi(args[0])
	if !ok || port < 1 || port > 65535 {
		return fail("port " + args[0] + " is not between 1 and 65535")
	}
	tokenFD, ok := atoi(args[2])
	if !ok || tokenFD < 3 {
		return fail("token descriptor " + args[2] + " is not a descriptor above 2")
	}
	sock, argv := args[1], args[4:]
	// Not dumpable: no other process of the user reads this one's memory or descriptors.
	const prSetDumpable = 4
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	token := make([]byte, 0, 80)
	chunk := make([]byte, tokenMax+1)
	for len(token) <= tokenMax {
		n, err := syscall.Read(tokenFD, chunk)
		if n > 0 {
			token = append(token, chunk[:n]...)
		}
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			break
		}
	}
	syscall.Close(tokenFD) // the command must not inherit it
	if len(token) == 0 || len(token) > tokenMax {
		return fail("no session token on descriptor " + args[2])
	}
	token = append(token, '\n')

	lfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("listen for the sandbox's proxy: " + err.Error())
	}
	_ = syscall.SetsockoptInt(lfd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(lfd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail("listen on 127.0.0.1:" + args[0] + ": " + err.Error())
	}
	if err := syscall.Listen(lfd, 128); err != nil {
		return fail("listen on 127.0.0.1:" + args[0] + ": " + err.Error())
	}
	go accept(lfd, sock, token)

	path := argv[0]
	if base(path) == path {
		if path = lookPath(path); path == "" {
			return fail(argv[0] + ": not found")
		}
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: syscall.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		return fail("run " + argv[0] + ": " + err.Error())
	}
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		switch {
		case err != nil:
			return fail("wait for " + argv[0] + ": " + err.Error())
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

// lookPath finds name on the PATH of the environment, or "".
func lookPath(name string) string {
	p, _ := syscall.Getenv("PATH")
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == ':' {
			dir := p[start:i]
			start = i + 1
			if dir == "" {
				continue
			}
			full := dir + "/" + name
			if syscall.Access(full, 1 /* X_OK */) == nil {
				return full
			}
		}
	}
	return ""
}

// accept relays each connection made to the listener until it fails (the forwarder
// exits with its command).
func accept(lfd int, sock string, token []byte) {
	for {
		c, _, err := syscall.Accept4(lfd, syscall.SOCK_CLOEXEC)
		if err == syscall.EINTR || err == syscall.ECONNABORTED {
			continue
		}
		if err != nil {
			return
		}
		go relay(c, sock, token)
	}
}

// relay splices one connection of the sandbox to a fresh connection to the session's
// socket, the token line first, until both directions end.
func relay(c int, sock string, token []byte) {
	defer syscall.Close(c)
	u, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(u)
	if err := syscall.Connect(u, &syscall.SockaddrUnix{Name: sock}); err != nil {
		return
	}
	if !writeAll(u, token) {
		return
	}
	done := make(chan struct{})
	go func() {
		pump(c, u)
		close(done)
	}()
	pump(u, c)
	<-done
}

// pump copies from one descriptor to the other until EOF or an error, then ends the
// other's writing half so its reader sees the end.
func pump(from, to int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := syscall.Read(from, buf)
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			break
		}
		if !writeAll(to, buf[:n]) {
			break
		}
	}
	_ = syscall.Shutdown(to, syscall.SHUT_WR)
}

func writeAll(fd int, b []byte) bool {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return false
		}
		b = b[n:]
	}
	return true
}
