package debug

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// Adapter names (DESIGN.md §4 debug).
const (
	adapterDebugpy = "debugpy"
	adapterDelve   = "delve"
	adapterLLDB    = "lldb"
	adapterDart    = "dart"
)

// adapterInfo is one row of the adapter table: what marks a project of its
// language and which executables can serve it (first found wins).
type adapterInfo struct {
	name     string
	language string
	markers  []string
	binaries []string
	// sdk, when set, is what provides the executables and the command an
	// adapter runs, for the message when none is found (the Dart SDK is
	// not in the sandbox image).
	sdk string
}

// adapterTable is the fixed adapter table, in the order adapters lists it.
func adapterTable() []adapterInfo {
	return []adapterInfo{
		{adapterDebugpy, "Python", []string{"pyproject.toml", "setup.py", "requirements.txt"}, []string{"python3"}, ""},
		{adapterDelve, "Go", []string{"go.mod"}, []string{"dlv"}, ""},
		{adapterLLDB, "C, C++ and Rust", []string{"Cargo.toml", "CMakeLists.txt"},
			[]string{"lldb-dap", "lldb-vscode", "lldb-dap-19", "lldb-dap-18", "lldb-vscode-17", "lldb-vscode-16", "lldb-vscode-15", "lldb-vscode-14"}, ""},
		{adapterDart, "Dart", []string{"pubspec.yaml"}, []string{"dart"}, "the Dart SDK (for `dart debug_adapter`)"},
	}
}

// notFound says which executables are not on $PATH and, where one SDK
// provides them, that the SDK is what is missing.
func (a adapterInfo) notFound() string {
	out := strings.Join(a.binaries, " or ") + " not on $PATH"
	if a.sdk != "" {
		out += ": " + a.sdk + " is not installed in the sandbox"
	}
	return out
}

func lookupAdapter(name string) adapterInfo {
	for _, a := range adapterTable() {
		if a.name == name {
			return a
		}
	}
	panic("debug: unknown adapter " + name)
}

// adapterFor picks the adapter for a program by its extension; a program
// without one is a compiled binary (lldb) unless it is a Go package
// directory.
func adapterFor(program string, isDir bool) string {
	switch strings.ToLower(path.Ext(program)) {
	case ".py", ".pyw":
		return adapterDebugpy
	case ".go":
		return adapterDelve
	case ".dart":
		return adapterDart
	}
	if isDir {
		return adapterDelve
	}
	return adapterLLDB
}

// probe is what one look into the sandbox found: executables on $PATH,
// root markers from a start directory up to the root, the nearest project
// virtualenv, and whether the chosen python can import debugpy.
type probe struct {
	bins      map[string]string   // executable name -> path
	markers   map[string][]string // marker file name -> directories holding it, nearest first
	venv      string              // nearest .venv/bin/python or venv/bin/python
	isDir     bool                // the start path is a directory
	exists    bool                // the start path exists
	debugpyOK bool
}

// probeScript prints tab-separated facts; $1 is the root, $2 the program
// (or the root), $3 is "check" to test that debugpy imports, the rest are
// executables to look up.
const probeScript = `root=$1; start=$2; check=$3; shift 3
for b in "$@"; do p=$(command -v "$b" 2>/dev/null) && printf 'bin\t%s\t%s\n' "$b" "$p"; done
if [ -d "$start" ]; then printf 'dir\n'; d=$start; else d=$(dirname "$start"); fi
[ -e "$start" ] && printf 'exists\n'
while :; do
  for m in pubspec.yaml pyproject.toml setup.py requirements.txt Cargo.toml CMakeLists.txt go.mod; do
    [ -e "$d/$m" ] && printf 'marker\t%s\t%s\n' "$m" "$d"
  done
  for v in .venv venv; do [ -x "$d/$v/bin/python" ] && printf 'venv\t%s\n' "$d/$v/bin/python"; done
  if [ "$d" = "$root" ] || [ "$d" = / ] || [ "$d" = . ]; then break; fi
  d=$(dirname "$d")
done
if [ "$check" = check ]; then
  py=$PY
  [ -n "$py" ] || py=$(command -v python3)
  [ -n "$py" ] && "$py" -c 'import debugpy' 2>/dev/null && printf 'debugpy\tok\n'
fi
true
`

// runProbe looks into the sandbox in one round trip. With checkDebugpy
// the nearest venv's python (else python3) is asked to import debugpy.
func runProbe(ctx context.Context, ag *agent.Client, root, start string, checkDebugpy bool) (*probe, error) {
	var bins []string
	for _, a := range adapterTable() {
		bins = append(bins, a.binaries...)
	}
	check := "no"
	if checkDebugpy {
		check = "check"
	}
	// The venv is found by the same walk; run the walk first so the
	// debugpy check uses the python a launch would use.
	p, err := probeOnce(ctx, ag, root, start, "no", "", bins)
	if err != nil || !checkDebugpy {
		return p, err
	}
	p2, err := probeOnce(ctx, ag, root, start, check, p.venv, nil)
	if err != nil {
		return nil, err
	}
	p.debugpyOK = p2.debugpyOK
	return p, nil
}

func probeOnce(ctx context.Context, ag *agent.Client, root, start, check, py string, bins []string) (*probe, error) {
	argv := append([]string{"/bin/sh", "-c", probeScript, "sh", root, start, check}, bins...)
	res, err := ag.Exec(ctx, &proto.ExecRequest{Argv: argv, Env: map[string]string{"PY": py}, Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("looking for debug adapters in the sandbox: %w", err)
	}
	p := &probe{bins: map[string]string{}, markers: map[string][]string{}}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Split(line, "\t")
		switch {
		case f[0] == "bin" && len(f) == 3:
			p.bins[f[1]] = f[2]
		case f[0] == "marker" && len(f) == 3:
			p.markers[f[1]] = append(p.markers[f[1]], f[2])
		case f[0] == "venv" && len(f) == 2 && p.venv == "":
			p.venv = f[1]
		case f[0] == "dir":
			p.isDir = true
		case f[0] == "exists":
			p.exists = true
		case f[0] == "debugpy":
			p.debugpyOK = true
		}
	}
	return p, nil
}

// binary is the first of the adapter's executables found ("" if none).
func (p *probe) binary(a adapterInfo) string {
	for _, b := range a.binaries {
		if path, ok := p.bins[b]; ok {
			return path
		}
	}
	return ""
}

// marker is the nearest root marker of the adapter: its directory and name.
func (p *probe) marker(a adapterInfo) (dir, name string) {
	best := -1
	for _, m := range a.markers {
		for _, d := range p.markers[m] {
			if depth := strings.Count(d, "/"); depth > best {
				best, dir, name = depth, d, m
			}
		}
	}
	return dir, name
}

// python is the interpreter debugpy runs with: the project's venv first.
func (p *probe) python() (string, string) {
	if p.venv != "" {
		return p.venv, "the project's " + path.Base(path.Dir(path.Dir(p.venv)))
	}
	if py, ok := p.bins["python3"]; ok {
		return py, "$PATH"
	}
	return "", ""
}

// describeAdapters renders the adapters operation: each adapter, whether
// it can be used here, and what is present or missing.
func describeAdapters(p *probe, root string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Debug adapters for %s (an adapter needs its executable AND a root marker):\n", root)
	for _, a := range adapterTable() {
		bin := p.binary(a)
		if a.name == adapterDebugpy {
			bin, _ = p.python()
		}
		dir, marker := p.marker(a)
		var missing, present []string
		if bin == "" {
			missing = append(missing, "executable ("+a.notFound()+")")
		} else {
			present = append(present, "executable "+bin)
		}
		if a.name == adapterDebugpy && bin != "" {
			if p.debugpyOK {
				present = append(present, "debugpy importable")
			} else {
				missing = append(missing, "the debugpy module (pip install debugpy into "+bin+")")
			}
		}
		if marker == "" {
			missing = append(missing, "root marker ("+strings.Join(a.markers, ", ")+")")
		} else {
			present = append(present, "root marker "+path.Join(dir, marker))
		}
		state := "usable"
		if len(missing) > 0 {
			state = "NOT usable"
		}
		fmt.Fprintf(&b, "- %s (%s): %s", a.name, a.language, state)
		if len(present) > 0 {
			fmt.Fprintf(&b, "; present: %s", strings.Join(present, ", "))
		}
		if len(missing) > 0 {
			fmt.Fprintf(&b, "; missing: %s", strings.Join(missing, ", "))
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}
