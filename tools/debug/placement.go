package debug

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	godap "github.com/google/go-dap"
)

// Breakpoints belong to the conversation, not to one session: those set
// for an earlier program (a Python file from a debugpy session, a Go file
// of another program) are still set when the next program launches. Only
// the ones the launched program can stop at may count as placed, or a
// launch waits the whole stop wait for a stop that cannot come.

// filePlacement is what the adapter said of one file's breakpoints.
type filePlacement struct {
	file  string
	lines []int
	bps   []godap.Breakpoint // the adapter's response, in the order of lines
}

// languageOf names a source file's language by its extension ("" when the
// extension is not one this tool tells apart).
func languageOf(file string) string {
	switch strings.ToLower(path.Ext(file)) {
	case ".py", ".pyw":
		return "Python"
	case ".dart":
		return "Dart"
	case ".go":
		return "Go"
	case ".c", ".h":
		return "C"
	case ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx":
		return "C++"
	case ".rs":
		return "Rust"
	case ".js", ".mjs", ".cjs", ".jsx":
		return "JavaScript"
	case ".ts", ".mts", ".cts", ".tsx":
		return "TypeScript"
	case ".rb":
		return "Ruby"
	case ".java", ".kt":
		return "JVM"
	}
	return ""
}

// notNative are languages run by an interpreter or a VM, where neither
// delve nor lldb can stop.
var notNative = map[string]bool{"Python": true, "Dart": true, "JavaScript": true, "TypeScript": true, "Ruby": true, "JVM": true}

// canStopIn tells whether a session of adapter could ever stop in file.
// debugpy reports "verified" for any file that exists, so it gets only
// Python; dart only Dart. delve and lldb check compiled files themselves
// against the program's debug information (delve also stops in a cgo
// program's C, lldb in a Go binary's Go), so they are kept only from the
// languages no native program is made of.
func canStopIn(adapter, file string) bool {
	lang := languageOf(file)
	switch adapter {
	case adapterDebugpy:
		return lang == "Python"
	case adapterDart:
		return lang == "Dart"
	}
	return !notNative[lang]
}

// splitBreakpoints parts the conversation's breakpoints into those sent to
// the adapter and those in files it cannot stop in.
func splitBreakpoints(adapter string, bps map[string][]int) (send, foreign map[string][]int) {
	send, foreign = map[string][]int{}, map[string][]int{}
	for f, lines := range bps {
		if canStopIn(adapter, f) {
			send[f] = lines
		} else {
			foreign[f] = lines
		}
	}
	return send, foreign
}

// foreignReason says why adapter cannot stop in file.
func foreignReason(adapter, file string) string {
	lang := languageOf(file)
	what := lang + " code"
	if lang == "" {
		what = "not " + lookupAdapter(adapter).language + " code"
	}
	return fmt.Sprintf("%s; %s debugs %s", what, adapter, lookupAdapter(adapter).language)
}

// describePlacement is the launch's account of the breakpoints: a line per
// file with breakpoints placed, then one sentence naming every breakpoint
// not placed for this program and why (they stay set for a later launch).
// rel shows a path as the model gave it.
func describePlacement(adapter string, placed []filePlacement, foreign map[string][]int, rel func(string) string) string {
	type miss struct {
		file   string
		lines  []int
		reason string
	}
	var out []string
	misses := map[string][]miss{}
	for _, fp := range placed {
		var ok []string
		for i, bp := range fp.bps {
			want := 0
			if i < len(fp.lines) {
				want = fp.lines[i]
			}
			switch {
			case bp.Verified && bp.Line != 0 && bp.Line != want:
				ok = append(ok, fmt.Sprintf("%d (moved to %d)", want, bp.Line))
			case bp.Verified:
				ok = append(ok, strconv.Itoa(want))
			default:
				reason := fmt.Sprintf("%s found no code there", adapter)
				if bp.Message != "" {
					reason = strings.ReplaceAll(oneLine(bp.Message), fp.file, rel(fp.file))
				}
				ms := misses[fp.file]
				if n := len(ms); n > 0 && ms[n-1].reason == reason {
					ms[n-1].lines = append(ms[n-1].lines, want)
				} else {
					ms = append(ms, miss{fp.file, []int{want}, reason})
				}
				misses[fp.file] = ms
			}
		}
		if len(ok) > 0 {
			out = append(out, fmt.Sprintf("Breakpoints in %s: set at %s.", rel(fp.file), strings.Join(ok, ", ")))
		}
	}
	for f, lines := range foreign {
		misses[f] = []miss{{f, lines, foreignReason(adapter, f)}}
	}
	if len(misses) == 0 {
		return strings.Join(out, "\n")
	}
	var parts []string
	for _, f := range slices.Sorted(maps.Keys(misses)) {
		for _, m := range misses[f] {
			nums := make([]string, len(m.lines))
			for i, n := range m.lines {
				nums[i] = strconv.Itoa(n)
			}
			parts = append(parts, fmt.Sprintf("%s:%s (%s)", rel(m.file), strings.Join(nums, ","), m.reason))
		}
	}
	out = append(out, "Not placed for this program (they stay set for a later launch): "+strings.Join(parts, ", ")+".")
	return strings.Join(out, "\n")
}
