package dap

import godap "github.com/google/go-dap"

// SetBreakpointsArguments are setBreakpoints' arguments with both arrays
// always on the wire. go-dap's type tags them omitempty, so clearing a
// file (no breakpoints) sent neither, and debugpy failed the request and
// dropped its session instead of clearing; the protocol's empty array is
// what every adapter takes as "none in this file".
type SetBreakpointsArguments struct {
	Source      godap.Source             `json:"source"`
	Breakpoints []godap.SourceBreakpoint `json:"breakpoints"`
	Lines       []int                    `json:"lines"`
}

// NewSetBreakpoints builds the arguments for one file and its lines; no
// lines clears the file.
func NewSetBreakpoints(src godap.Source, lines []int) SetBreakpointsArguments {
	a := SetBreakpointsArguments{Source: src, Breakpoints: make([]godap.SourceBreakpoint, 0, len(lines)), Lines: make([]int, 0, len(lines))}
	for _, l := range lines {
		a.Breakpoints = append(a.Breakpoints, godap.SourceBreakpoint{Line: l})
		a.Lines = append(a.Lines, l)
	}
	return a
}
