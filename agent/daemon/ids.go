package daemon

import (
	"crypto/rand"
	"encoding/hex"
)

// randomID returns 12 random hex digits: unique across daemon restarts.
func randomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
