package debug

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	godap "github.com/google/go-dap"
)

// maxListedIDs caps the valid ids an error lists.
const maxListedIDs = 20

// handedIDs are the ids this session has shown the model. Adapters treat
// an id they never issued in their own ways (lldb responds to a made-up
// frame's scopes, delve evaluates in the top frame, debugpy has dropped
// its session), so an id is checked here and never sent when unknown.
// All of them belong to one stop: DAP invalidates frames and references
// when the program resumes, and threads end meanwhile (delve's goroutines
// come and go without thread events), so an id not seen since the stop
// is checked against a fresh threads response.
type handedIDs struct {
	stop    *godap.StoppedEventBody // the stop frames and refs belong to
	frames  map[int]string          // frame id -> function name
	order   []int                   // frame ids in the order shown
	refs    map[int]bool
	threads map[int]bool
}

// idsCurrentLocked drops frames and references of an earlier stop; the
// caller holds s.mu.
func (s *session) idsCurrentLocked() *handedIDs {
	h := &s.ids
	if h.frames == nil || h.stop != s.stop {
		h.stop, h.frames, h.order, h.refs, h.threads = s.stop, map[int]string{}, nil, map[int]bool{}, map[int]bool{}
		if s.stop != nil && s.stop.ThreadId != 0 {
			h.threads[s.stop.ThreadId] = true
		}
	}
	return h
}

func (s *session) noteFrames(frames []godap.StackFrame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.idsCurrentLocked()
	for _, f := range frames {
		if _, ok := h.frames[f.Id]; !ok {
			h.order = append(h.order, f.Id)
		}
		h.frames[f.Id] = f.Name
	}
}

func (s *session) noteRefs(refs ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.idsCurrentLocked()
	for _, r := range refs {
		if r > 0 {
			h.refs[r] = true
		}
	}
}

func (s *session) noteThreads(ids ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.idsCurrentLocked()
	for _, id := range ids {
		h.threads[id] = true
	}
}

// checkFrame refuses a frame id not shown since the last stop.
func (s *session) checkFrame(id int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.idsCurrentLocked()
	if _, ok := h.frames[id]; ok {
		return nil
	}
	if s.stop == nil && len(h.order) == 0 {
		return userf("frame_id %d is not valid: the program is running, and frame ids hold only while it is stopped (call pause, then stack).", id)
	}
	if len(h.order) == 0 {
		return userf("frame_id %d was not handed out by this session since the program last stopped; call stack for the current frame ids.", id)
	}
	list := make([]string, 0, min(len(h.order), maxListedIDs))
	for _, f := range h.order[:min(len(h.order), maxListedIDs)] {
		list = append(list, fmt.Sprintf("%d (%s)", f, oneLine(h.frames[f])))
	}
	return userf("frame_id %d was not handed out by this session since the program last stopped; valid frame ids: %s%s. Call stack for the others.", id, strings.Join(list, ", "), more(len(h.order)))
}

// checkRef refuses a variables reference not shown since the last stop.
func (s *session) checkRef(ref int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.idsCurrentLocked()
	if h.refs[ref] {
		return nil
	}
	if len(h.refs) == 0 {
		return userf("reference %d was not handed out by this session since the program last stopped; call scopes with a frame_id for the current references.", ref)
	}
	return userf("reference %d was not handed out by this session since the program last stopped; valid references: %s%s. They come from scopes, variables ([ref N]) and evaluate.", ref, sortedIDs(h.refs), more(len(h.refs)))
}

// checkThread refuses a thread id the adapter has not named since the
// last stop; an unknown one is looked up once more with a threads request
// (threads start and end without telling us), which carries no id.
func (s *session) checkThread(ctx context.Context, c *call, id int) error {
	s.mu.Lock()
	ok := s.idsCurrentLocked().threads[id]
	s.mu.Unlock()
	if ok {
		return nil
	}
	if _, err := c.listThreads(ctx, s); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.idsCurrentLocked()
	if h.threads[id] {
		return nil
	}
	return userf("thread_id %d is not a thread of the debuggee; its threads are: %s%s. Call threads for their names.", id, sortedIDs(h.threads), more(len(h.threads)))
}

// listThreads asks the adapter for the threads and notes their ids.
func (c *call) listThreads(ctx context.Context, s *session) ([]godap.Thread, error) {
	var body godap.ThreadsResponseBody
	rctx, cancel := context.WithTimeout(ctx, c.sv.to.request)
	defer cancel()
	if err := s.conn.Do(rctx, "threads", nil, &body); err != nil {
		return nil, err
	}
	ids := make([]int, len(body.Threads))
	for i, t := range body.Threads {
		ids[i] = t.Id
	}
	s.noteThreads(ids...)
	return body.Threads, nil
}

func sortedIDs(m map[int]bool) string {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, 0, maxListedIDs)
	for _, id := range ids[:min(len(ids), maxListedIDs)] {
		parts = append(parts, strconv.Itoa(id))
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}

func more(n int) string {
	if n <= maxListedIDs {
		return ""
	}
	return fmt.Sprintf(" and %d more", n-maxListedIDs)
}
