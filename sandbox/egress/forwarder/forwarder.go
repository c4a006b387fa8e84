// Package forwarder is the egress proxy's end inside a sandbox: any binary that links it
// (the worker does, through sandbox/egress) becomes, when run under the name Name,
//
//	nexo-egress-forward PORT SOCKET TOKENFD -- COMMAND [ARG...]
//
// which reads the session's token from descriptor TOKENFD (a pipe the worker wrote it
// to), makes itself non-dumpable, listens on 127.0.0.1:PORT, relays every connection
// made there to the unix socket SOCKET (the session's, bound into the sandbox) after a
// token line, runs COMMAND, and exits with its status. The sandbox has no network of its
// own: this is its only way out. The token keeps other processes of the worker's user (a
// local-tier command) from using a session's socket as their own: it never is in an
// argument, an environment or a file.
//
// Why raw system calls: the forwarder starts before every command of a sandbox with
// egress, so it must start in a millisecond or two. It runs in this package's init,
// which Go runs as soon as its only dependency (syscall) is ready, before the worker's
// hundreds of other packages initialise (about 40 ms of init work in the worker binary);
// so it can use nothing of os, net or os/exec, whose own inits have not run yet.
package forwarder

// Name is the name (argv[0]'s last element) the forwarder answers to.
const Name = "nexo-egress-forward"
