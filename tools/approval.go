package tools

import "context"

// The answers to a permission question a write or exec call asked (the
// approval gate), as a CallRecord carries them: "" when none was asked.
const (
	ApprovalAllowOnce   = "allow_once"
	ApprovalAllowForRun = "allow_for_run"
	ApprovalDenied      = "denied"    // the human chose Deny
	ApprovalSkipped     = "skipped"   // the human skipped the question: refused
	ApprovalExpired     = "expired"   // nobody answered in time: refused
	ApprovalNoHuman     = "no_human"  // nobody was connected to the space: refused at once
	ApprovalWithdrawn   = "withdrawn" // the run ended while it waited: refused
	ApprovalFailed      = "failed"    // the question could not be asked: refused
)

type callNoteKey struct{}

// callNote is what a gate tells the registry about one call.
type callNote struct{ approval string }

// NoteApproval records the answer to the permission question the call in
// ctx asked, for its CallRecord. A gate calls it, on the call's goroutine;
// outside a registry call it does nothing.
func NoteApproval(ctx context.Context, decision string) {
	if n, _ := ctx.Value(callNoteKey{}).(*callNote); n != nil {
		n.approval = decision
	}
}
