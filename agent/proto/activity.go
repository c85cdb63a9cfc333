package proto

import "time"

// OpActivity tells what the sandbox's long-lived processes are doing, for
// idle detection (a process printing output keeps its sandbox awake):
// Empty -> Activity (Response.Activity). A daemon that takes it says so
// with HelloResponse.Activity.
const OpActivity Op = "activity"

// Activity is the sandbox's process activity as its agent sees it.
type Activity struct {
	// At is the agent's clock when it answered: compare LastOutput with it,
	// not with the caller's clock.
	At time.Time `json:"at"`
	// LastOutput is when a long-lived process last wrote output, any of
	// them, in this daemon's life; zero when none has yet.
	LastOutput time.Time `json:"last_output,omitzero"`
	// Running counts the long-lived processes running.
	Running int `json:"running"`
}
