package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/mcpauth"
)

// mcpCmd manages the OAuth tokens of the agents' remote MCP servers in the worker's
// credential file (mcp.credentials_file). It needs no Temporal; it never prints a token.
func mcpCmd() *command {
	return &command{
		name: "mcp", args: "login <agent> <server> | logout <agent> <server> | status [--json]",
		summary: "Log in to an agent's OAuth MCP server (tokens go to mcp.credentials_file), log out, or show which servers have a token.",
		flags: func(fs *pflag.FlagSet) {
			fs.Duration("timeout", mcpauth.DefaultLoginTimeout, "login: how long to wait for the browser's redirect")
			fs.Bool("json", false, "status: print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: login, logout or status")
			}
			cfg, err := e.config()
			if err != nil {
				return err
			}
			file := mcpauth.File{Path: cfg.MCP.CredentialsFile}
			switch args[0] {
			case "login", "logout":
				if len(args) != 3 {
					return usagef("mcp %s takes an agent and a server, got %q", args[0], args[1:])
				}
				spec, err := oauthServer(cfg, args[1], args[2])
				if err != nil {
					return err
				}
				if args[0] == "logout" {
					had, err := mcpauth.Logout(ctx, file, spec)
					if err != nil {
						return err
					}
					if !had {
						fmt.Fprintf(e.stdout, "no token was stored for %s (%s) in %s\n", spec.Name, spec.URL, file.Path)
						return nil
					}
					fmt.Fprintf(e.stdout, "logged out of %s (%s): its tokens are removed from %s\n", spec.Name, spec.URL, file.Path)
					return nil
				}
				timeout, _ := fs.GetDuration("timeout")
				en, err := mcpauth.Login(ctx, file, spec, mcpauth.LoginOptions{Out: e.stdout, Timeout: timeout})
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "logged in to %s (%s); tokens stored in %s (%s)\n", spec.Name, spec.URL, file.Path, expiry(en))
				return nil
			case "status":
				if len(args) != 1 {
					return usagef("mcp status takes no arguments, got %q", args[1:])
				}
				asJSON, _ := fs.GetBool("json")
				return mcpStatus(ctx, e, cfg, file, asJSON)
			}
			return unknownSubcommand("subcommand", args[0], "login", "logout", "status")
		},
	}
}

// oauthServer finds the server an agent declares with oauth.
func oauthServer(cfg config.Config, agent, server string) (api.MCPServerSpec, error) {
	for _, a := range cfg.Agents {
		if a.Name != agent {
			continue
		}
		for _, m := range a.MCP {
			if m.Name != server {
				continue
			}
			if m.OAuth == nil {
				return api.MCPServerSpec{}, fmt.Errorf("agent %s: MCP server %s is not declared with oauth (nothing to log in to)", agent, server)
			}
			return m, nil
		}
		return api.MCPServerSpec{}, fmt.Errorf("agent %s declares no MCP server %s", agent, server)
	}
	return api.MCPServerSpec{}, fmt.Errorf("no agent %s in the config", agent)
}

// mcpServerStatus is one line of `mcp status --json`.
type mcpServerStatus struct {
	Agent     string     `json:"agent"`
	Server    string     `json:"server"`
	URL       string     `json:"url"`
	ClientID  string     `json:"client_id"`
	LoggedIn  bool       `json:"logged_in"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Refresh   bool       `json:"refresh_token"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

func mcpStatus(ctx context.Context, e *env, cfg config.Config, file mcpauth.File, asJSON bool) error {
	stored, err := file.Entries(ctx)
	if err != nil {
		return err
	}
	var list []mcpServerStatus
	for _, a := range cfg.Agents {
		for _, m := range a.MCP {
			if m.OAuth == nil {
				continue
			}
			st := mcpServerStatus{Agent: a.Name, Server: m.Name, URL: m.URL, ClientID: m.OAuth.ClientID}
			if en, ok := stored[mcpauth.Key(m.URL, m.OAuth.ClientID)]; ok {
				st.LoggedIn, st.Refresh = true, en.RefreshToken != ""
				if !en.ExpiresAt.IsZero() {
					st.ExpiresAt = &en.ExpiresAt
				}
				st.UpdatedAt = &en.Updated
			}
			list = append(list, st)
		}
	}
	if asJSON {
		if list == nil {
			list = []mcpServerStatus{}
		}
		return e.printJSON(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stdout, "no agent declares an MCP server with oauth")
		return nil
	}
	fmt.Fprintf(e.stdout, "credential file: %s\n", file.Path)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, st := range list {
		state := "not logged in (run: starter mcp login " + st.Agent + " " + st.Server + ")"
		if st.LoggedIn {
			state = "logged in"
			if st.ExpiresAt != nil {
				state += ", access token expires " + st.ExpiresAt.Local().Format(time.RFC3339)
			}
			if st.Refresh {
				state += ", refreshed by the worker"
			} else {
				state += ", no refresh token"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", st.Agent, st.Server, st.URL, state)
	}
	return tw.Flush()
}

// expiry says when an entry's access token expires.
func expiry(en mcpauth.Entry) string {
	if en.ExpiresAt.IsZero() {
		return "the access token has no stated expiry"
	}
	s := "access token expires " + en.ExpiresAt.Local().Format(time.RFC3339)
	if en.RefreshToken != "" {
		s += "; the worker refreshes it"
	}
	return s
}
