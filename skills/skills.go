// Package skills reads skills: folders <skills_path>/<name>/ holding a SKILL.md (YAML front
// matter and a Markdown body, as in the Agent Skills format) and optional scripts/, assets/
// and references/ folders. An agent that declares a skill gets its body in the system
// prompt and its files in the run's sandbox.
//
// The package reads the host's file system and nothing else: the worker loads skills at
// start (to fail fast on a missing or broken one) and again, through an activity, when a
// run starts, whose recorded result is what the run uses from then on.
package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/nexo-temporal/nexo/api"
)

// Sentinel errors; the returned errors wrap them and name the file.
var (
	// ErrNotFound: no such skill (no <skills_path>/<name>/SKILL.md).
	ErrNotFound = errors.New("skill not found")
	// ErrInvalid: a SKILL.md or a skill folder that cannot be used as it is.
	ErrInvalid = errors.New("invalid skill")
	// ErrTooLarge: a skill over the size or file-count limits.
	ErrTooLarge = errors.New("skill too large")
	// ErrExist: Create found the skill already there.
	ErrExist = errors.New("skill already exists")
)

// Limits of a skill. A skill is small: its body travels with every model request of the
// agents that use it (in workflow history), and its files are copied into every run's
// sandbox.
const (
	// FileName is the skill's definition inside its folder.
	FileName = "SKILL.md"
	// MaxSkillFileBytes caps SKILL.md.
	MaxSkillFileBytes = 64 << 10
	// MaxTotalBytes caps SKILL.md plus every file of scripts/, assets/ and references/.
	MaxTotalBytes = 8 << 20
	// MaxFiles caps the number of files copied into the sandbox.
	MaxFiles = 1000
	// MaxDescription and MaxCompatibility cap those front-matter fields (characters).
	MaxDescription   = 1024
	MaxCompatibility = 500
)

// Kinds are the folders of a skill whose files are copied into the sandbox, in order.
var Kinds = []string{"scripts", "assets", "references"}

// Skill is a loaded skill.
type Skill struct {
	// Name is the skill's name, equal to its folder's.
	Name string
	// Description says what the skill does and when to use it.
	Description string
	// Compatibility, when set, states what the skill needs (shown to the model).
	Compatibility string
	// License and AllowedTools are read for completeness; neither reaches the model.
	License      string
	AllowedTools []string
	// Metadata holds the front matter's free-form metadata: map.
	Metadata map[string]string
	// Body is the Markdown after the front matter.
	Body string
	// Dir is the skill's folder on the host.
	Dir string
	// Files are the files of scripts/, assets/ and references/, sorted by path.
	Files []File
}

// File is one file of a skill.
type File struct {
	// Path is relative to the skill's folder, with forward slashes: "scripts/run.py".
	Path string
	// Data is the file's bytes, verbatim.
	Data []byte
	// Executable is set when any execute bit is set on the host.
	Executable bool
}

// SandboxDir is the workspace folder the skill's files are copied to: skills/<name>.
func (s Skill) SandboxDir() string { return path.Join(api.SkillsDir, s.Name) }

// Size is the bytes of the skill's files (SKILL.md not included).
func (s Skill) Size() int64 {
	var n int64
	for _, f := range s.Files {
		n += int64(len(f.Data))
	}
	return n
}

// Prompt is the skill's contribution to the system prompt: a line naming the skill with
// its description, where its files are (when it has any), the body, and a labelled
// "Compatibility:" line when the skill declares one. License and allowed-tools are never
// shown.
func (s Skill) Prompt() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Skill %s: %s\n", s.Name, oneLine(s.Description))
	if len(s.Files) > 0 {
		fmt.Fprintf(&b, "Its files are in the workspace under %[1]s/ (the skill's scripts/run.sh is %[1]s/scripts/run.sh there).\n", s.SandboxDir())
	}
	b.WriteString("\n")
	b.WriteString(strings.TrimSpace(s.Body))
	if c := oneLine(s.Compatibility); c != "" {
		b.WriteString("\n\nCompatibility: " + c)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Load reads and validates the skill name under root: root/name/SKILL.md and the files of
// its scripts/, assets/ and references/ folders. Every problem of the front matter is
// reported at once, each naming the file, line and field. Hidden files (".keep") are not
// part of a skill; a symbolic link is refused, so a skill can never carry a host file
// from outside its folder.
func Load(root, name string) (Skill, error) {
	if err := api.ValidateSkillName(name); err != nil {
		return Skill{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dir := filepath.Join(root, name)
	file := filepath.Join(dir, FileName)
	data, err := readCapped(file, MaxSkillFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Skill{}, fmt.Errorf("%w: %s: no such file (skill %q under skills_path %s)", ErrNotFound, file, name, root)
	}
	if err != nil {
		return Skill{}, err
	}
	s, errs := parse(file, data)
	if s.Name != "" && s.Name != name {
		errs = append(errs, &Error{File: file, Line: s.nameLine, Field: "name",
			Problem: fmt.Sprintf("%q does not match its folder %q", s.Name, name)})
	}
	if len(errs) > 0 {
		return Skill{}, errors.Join(errs...)
	}
	s.Dir = dir
	files, err := readFiles(dir, int64(len(data)))
	if err != nil {
		return Skill{}, err
	}
	s.Files = files
	return s.Skill, nil
}

// List loads every skill under root, sorted by name. Skills that fail to load are left
// out and their errors joined into the returned error; a folder under root without a
// SKILL.md is such an error too. A missing root is ErrNotFound.
func List(root string) ([]Skill, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: skills folder %s does not exist (create one with: starter skill new NAME)", ErrNotFound, root)
	}
	if err != nil {
		return nil, fmt.Errorf("list skills in %s: %w", root, err)
	}
	var (
		out  []Skill
		errs []error
	)
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		s, err := Load(root, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// readCapped reads file, refusing one over limit bytes, or one that is not a regular file:
// it is opened non-blocking and checked once open, since a FIFO would block the open (and
// the worker's start) until a writer came.
func readCapped(file string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, file)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is over %d KiB; its body travels with every model request, so keep it short and move detail to references/", ErrTooLarge, file, limit>>10)
	}
	return data, nil
}

// readFiles reads the files of the skill's kinds, enforcing the limits before reading.
func readFiles(dir string, used int64) ([]File, error) {
	var files []File
	total := used
	for _, kind := range Kinds {
		top := filepath.Join(dir, kind)
		info, err := os.Lstat(top)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read skill folder %s: %w", top, err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("%w: %s: want a folder (a skill's %s/ holds files)", ErrInvalid, top, kind)
		}
		err = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != top && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return fmt.Errorf("%w: %s is a symbolic link; put the file itself in the skill (links are not followed, so a skill cannot carry files from elsewhere on the host)", ErrInvalid, p)
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%w: %s is not a regular file", ErrInvalid, p)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
			if total > MaxTotalBytes {
				return fmt.Errorf("%w: the files of skill folder %s pass %d MiB at %s; keep large data out of skills (mount it with ro_binds or bake it into the image)", ErrTooLarge, dir, MaxTotalBytes>>20, p)
			}
			if len(files) >= MaxFiles {
				return fmt.Errorf("%w: skill folder %s has more than %d files", ErrTooLarge, dir, MaxFiles)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, File{Path: filepath.ToSlash(rel), Data: data, Executable: info.Mode().Perm()&0o111 != 0})
			return nil
		})
		if err != nil {
			if errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			return nil, fmt.Errorf("read skill folder %s: %w", top, err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}
