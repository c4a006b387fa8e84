// Package mcpauth holds the OAuth 2.1 credentials of remote MCP servers: the credential
// file that `starter mcp login` writes and workers read and refresh, the token store the
// MCP client reads it through, and the login flow (authorization code with PKCE and a
// loopback redirect). The OAuth protocol itself is mcp-go's (transport.OAuthHandler);
// this package decides where tokens live and who may rotate them.
//
// Tokens never leave the file and the processes that read it: nothing here returns them
// in an error, and api types name the server and client only.
package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fileVersion is the format of the credential file.
const fileVersion = 1

// lockPoll is how often a waiter tries the lock again.
const lockPoll = 20 * time.Millisecond

// DefaultLockWait bounds how long a caller whose context has no deadline (`starter mcp
// status`) waits for another process to release the file's lock.
const DefaultLockWait = 10 * time.Second

// Entry is the stored credentials of one server and client.
type Entry struct {
	URL          string `json:"url"`
	ClientID     string `json:"client_id"`
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope,omitempty"`
	// ExpiresAt is when the access token expires; zero: the server did not say.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Lifetime is how long the access token was issued for, to refresh it ahead of time.
	Lifetime time.Duration `json:"lifetime,omitempty"`
	// Updated is when the entry was last written (login or refresh).
	Updated time.Time `json:"updated"`
}

type fileData struct {
	Version int              `json:"version"`
	Servers map[string]Entry `json:"servers"`
}

// Key names the entry of a server URL and client id in the file.
func Key(url, clientID string) string { return url + " " + clientID }

// File is the credential file at Path. Every read and write holds an exclusive flock on
// Path+".lock", so the starter and the workers of one machine see each other's writes
// whole, and a refresh (read, ask the authorization server, write) is never interleaved
// with another: a rotated refresh token is never lost. Writes go to a temporary file in
// the same folder, mode 0600, renamed over the file.
//
// The file holds tokens, so like ssh with a private key, a file that its group or others
// may read or write is refused, not used: it may already have leaked, and a token another
// user wrote would be trusted.
type File struct {
	Path string
	// LockWait bounds the wait for the lock when ctx has no deadline; 0 is DefaultLockWait.
	LockWait time.Duration
}

// Entries returns every stored entry, by Key.
func (f File) Entries(ctx context.Context) (map[string]Entry, error) {
	var out map[string]Entry
	err := f.locked(ctx, func() error {
		d, err := f.read()
		out = d.Servers
		return err
	})
	return out, err
}

// Get returns the entry of key, and whether there is one.
func (f File) Get(ctx context.Context, key string) (Entry, bool, error) {
	var e Entry
	var ok bool
	err := f.locked(ctx, func() error {
		d, err := f.read()
		e, ok = d.Servers[key]
		return err
	})
	return e, ok, err
}

// Update runs fn on the stored entries under the lock and writes what it leaves, unless
// it fails.
func (f File) Update(ctx context.Context, fn func(map[string]Entry) error) error {
	return f.locked(ctx, func() error { return f.update(fn) })
}

// update is Update for a caller that holds the lock.
func (f File) update(fn func(map[string]Entry) error) error {
	d, err := f.read()
	if err != nil {
		return err
	}
	if err := fn(d.Servers); err != nil {
		return err
	}
	return f.write(d)
}

func (f File) read() (fileData, error) {
	d := fileData{Version: fileVersion, Servers: map[string]Entry{}}
	st, err := os.Stat(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read MCP credential file %s: %w", f.Path, err)
	}
	if !st.Mode().IsRegular() {
		return d, fmt.Errorf("read MCP credential file %s: not a regular file (mcp.credentials_file names a file, not a directory)", f.Path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return d, fmt.Errorf("read MCP credential file %s: its mode %04o lets other users read or change its tokens, so it is not used; run: chmod 600 %s (and log in again if others could read it)", f.Path, perm, f.Path)
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return d, fmt.Errorf("read MCP credential file %s: %w", f.Path, err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		// Not the decoder's message: it can quote the file, tokens included.
		return d, fmt.Errorf("read MCP credential file %s: it is not a credential file (invalid JSON); remove it and log in again", f.Path)
	}
	if d.Version != fileVersion {
		return d, fmt.Errorf("read MCP credential file %s: version %d, this Nexo reads version %d", f.Path, d.Version, fileVersion)
	}
	if d.Servers == nil {
		d.Servers = map[string]Entry{}
	}
	return d, nil
}

func (f File) write(d fileData) error {
	dir := filepath.Dir(f.Path)
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("write MCP credential file %s: %w", f.Path, err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(f.Path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write MCP credential file %s: %w", f.Path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write MCP credential file %s: %w", f.Path, err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write MCP credential file %s: %w", f.Path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write MCP credential file %s: %w", f.Path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write MCP credential file %s: %w", f.Path, err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("write MCP credential file %s: %w", f.Path, err)
	}
	return nil
}

// locked runs fn holding the file's lock, waiting for it until ctx ends.
func (f File) locked(ctx context.Context, fn func() error) error {
	if f.Path == "" {
		return errors.New("no MCP credential file configured (mcp.credentials_file)")
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return fmt.Errorf("open MCP credential file %s: %w", f.Path, err)
	}
	lf, err := os.OpenFile(f.Path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("lock MCP credential file %s: %w", f.Path, err)
	}
	defer lf.Close() // closing releases the lock
	if _, ok := ctx.Deadline(); !ok {
		wait := f.LockWait
		if wait <= 0 {
			wait = DefaultLockWait
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	start := time.Now()
	for {
		ok, err := tryLock(lf)
		if err != nil {
			return fmt.Errorf("lock MCP credential file %s: %w", f.Path, err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock MCP credential file %s: %s holds it; gave up after %s: %w", f.Path, holder(lf), time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	// Say who holds the lock, for whoever waits for it: this process's id and name, and
	// since when (the lock file holds nothing else).
	if err := lf.Truncate(0); err == nil {
		fmt.Fprintf(lf, "pid %d (%s) since %s\n", os.Getpid(), filepath.Base(os.Args[0]), time.Now().UTC().Format(time.RFC3339))
	}
	return fn()
}

// holder is what the lock file says of the process holding it.
func holder(lf *os.File) string {
	b := make([]byte, 200)
	n, _ := lf.ReadAt(b, 0)
	if line := strings.TrimSpace(strings.SplitN(string(b[:n]), "\n", 2)[0]); strings.HasPrefix(line, "pid ") {
		return line
	}
	return "another process"
}
