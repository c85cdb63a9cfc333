package debug

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strconv"

	godap "github.com/google/go-dap"
)

// maxModules caps the module names a session keeps (a program loads a
// few dozen shared objects; a runaway dlopen loop must not grow this).
const maxModules = 4096

// noteModule keeps a module's name from a module event, so a frame
// without source can say which library it is in.
func (s *session) noteModule(b godap.ModuleEventBody) {
	id := moduleKey(b.Module.Id)
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.Reason == "removed" {
		delete(s.modules, id)
		return
	}
	if s.modules == nil {
		s.modules = map[string]string{}
	}
	if _, ok := s.modules[id]; ok || len(s.modules) < maxModules {
		s.modules[id] = moduleName(b.Module)
	}
}

// moduleOf names the module a frame is in; "" when unknown. An id no
// event named is looked up once per call with a modules request, when
// the adapter has one.
func (c *call) moduleOf(ctx context.Context, s *session, f godap.StackFrame, asked *bool) string {
	id := moduleKey(f.ModuleId)
	if id == "" {
		if s.adapter == adapterLLDB {
			return c.lldbModule(ctx, s, f)
		}
		return ""
	}
	s.mu.Lock()
	name, ok := s.modules[id]
	s.mu.Unlock()
	if ok || *asked || !s.caps.SupportsModulesRequest {
		return name
	}
	*asked = true
	var body godap.ModulesResponseBody
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	if s.conn.Do(rctx, "modules", godap.ModulesArguments{}, &body) != nil {
		return ""
	}
	for _, m := range body.Modules {
		s.noteModule(godap.ModuleEventBody{Reason: "new", Module: m})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modules[id]
}

func moduleKey(id any) string {
	if id == nil {
		return ""
	}
	return fmt.Sprint(id)
}

func moduleName(m godap.Module) string {
	if m.Name != "" {
		return m.Name
	}
	return path.Base(m.Path)
}

// lldb-dap frame ids are the thread's index id shifted left by 19 bits,
// or'd with the frame's index (lldb-dap's MakeDAPFrameID).
const lldbThreadShift = 19

// lldbFrameModule reads "frame #1: 0x00007f… libc.so.6`start_thread + 9"
// lines of lldb's backtrace.
var lldbFrameModule = regexp.MustCompile("(?m)frame #(\\d+): 0x[0-9a-fA-F]+ ([^`\\s]+)`")

// lldbModule names the module of an lldb frame: lldb-dap gives frames
// without source neither a moduleId nor an address, so the thread's
// backtrace (a repl command through evaluate) is read once per call.
func (c *call) lldbModule(ctx context.Context, s *session, f godap.StackFrame) string {
	if c.lldbBT == nil {
		c.lldbBT = map[int]map[int]string{}
	}
	thread, index := f.Id>>lldbThreadShift, f.Id&(1<<lldbThreadShift-1)
	mods, ok := c.lldbBT[thread]
	if !ok {
		mods = map[int]string{}
		c.lldbBT[thread] = mods
		var body godap.EvaluateResponseBody
		rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
		defer cancel()
		if s.conn.Do(rctx, "evaluate", godap.EvaluateArguments{Expression: "`bt", FrameId: f.Id, Context: "repl"}, &body) == nil {
			for _, m := range lldbFrameModule.FindAllStringSubmatch(body.Result, maxFrames*4) {
				if n, err := strconv.Atoi(m[1]); err == nil {
					mods[n] = m[2]
				}
			}
		}
	}
	return mods[index]
}
