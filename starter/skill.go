package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/skills"
)

// skillCmd scaffolds and lists skills under skills_path. It reads the file system only
// (no Temporal), as the worker would at start.
func skillCmd() *command {
	return &command{
		name: "skill", args: "new <name> | list [--json]",
		summary: "Create a skill (SKILL.md and its folders) under skills_path, or list the skills a worker would load.",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("json", false, "list: print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: new <name> or list")
			}
			cfg, err := e.config()
			if err != nil {
				return err
			}
			switch args[0] {
			case "new":
				if len(args) != 2 {
					return usagef("skill new takes one name, got %q", args[1:])
				}
				return newSkill(e, cfg.SkillsPath, args[1])
			case "list":
				if len(args) != 1 {
					return usagef("skill list takes no arguments, got %q", args[1:])
				}
				asJSON, _ := fs.GetBool("json")
				return listSkills(e, cfg, asJSON)
			}
			return unknownSubcommand("subcommand", args[0], "new", "list")
		},
	}
}

func newSkill(e *env, root, name string) error {
	dir, err := skills.Create(root, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "created skill %s in %s\n", name, dir)
	fmt.Fprintf(e.stdout, "  %s   edit the description and the instructions\n", filepath.Join(dir, skills.FileName))
	for _, kind := range skills.Kinds {
		fmt.Fprintf(e.stdout, "  %s/\n", filepath.Join(dir, kind))
	}
	fmt.Fprintf(e.stdout, "use it from an agent with: skills: [%s]\n", name)
	return nil
}

// skillView is one line of `skill list --json`.
type skillView struct {
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	Compatibility string   `json:"compatibility,omitempty"`
	Files         int      `json:"files"`
	Bytes         int64    `json:"bytes"`
	Dir           string   `json:"dir"`
	Agents        []string `json:"agents,omitempty"`
}

// listSkills prints every skill under skills_path with its description and the configured
// agents that use it; skills that would not load, and skills agents name that are not
// there, are the error (exit 1), as they would stop a worker.
func listSkills(e *env, cfg config.Config, asJSON bool) error {
	root := cfg.SkillsPath
	list, err := skills.List(root)
	if len(list) == 0 && err != nil && len(cfg.Agents) == 0 {
		return err // no skills folder, or not one skill that loads: the error says which
	}
	usedBy := map[string][]string{}
	errs := []error{err}
	for _, a := range cfg.Agents {
		for i, name := range a.Skills {
			usedBy[name] = append(usedBy[name], a.Name)
			// A folder that is there but broken is already in err (List); name the others.
			if _, serr := os.Stat(filepath.Join(root, name)); serr != nil {
				if _, lerr := skills.Load(root, name); lerr != nil {
					errs = append(errs, fmt.Errorf("agents[%s].skills[%d]: %w", a.Name, i, lerr))
				}
			}
		}
	}
	if asJSON {
		views := make([]skillView, 0, len(list))
		for _, s := range list {
			views = append(views, skillView{Name: s.Name, Description: s.Description, Compatibility: s.Compatibility,
				Files: len(s.Files), Bytes: s.Size(), Dir: s.Dir, Agents: usedBy[s.Name]})
		}
		if perr := e.printJSON(views); perr != nil {
			return perr
		}
	} else {
		if len(list) == 0 {
			fmt.Fprintf(e.stdout, "no skills in %s (create one with: starter skill new NAME)\n", root)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		for _, s := range list {
			used := "unused"
			if a := usedBy[s.Name]; len(a) > 0 {
				used = "agents: " + strings.Join(a, ", ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%d files\t%s\n", s.Name, s.Description, len(s.Files), used)
		}
		tw.Flush()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("skills under %s that would stop a worker using them:\n%w", root, err)
	}
	return nil
}
