package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// The headers of a delivery (docs/DESIGN.md, Webhooks).
const (
	HeaderTimestamp = "X-Sandboxd-Timestamp" // Unix seconds of this attempt
	HeaderSignature = "X-Sandboxd-Signature" // "v1=" and the hex HMAC-SHA256
	HeaderEventID   = "X-Sandboxd-Event-Id"  // the same on every attempt: deduplicate on it
	HeaderEventType = "X-Sandboxd-Event-Type"
)

// Sign is the signature header's value for body sent at timestamp ts (Unix
// seconds): v1=hex(HMAC-SHA256(secret, ts + "." + body)). The timestamp is
// inside the MAC so a receiver can refuse old replays.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether header (the signature header's value) is the
// signature of body at timestamp ts (the timestamp header's value) under
// secret. Receivers in Go may call it; it compares in constant time.
func Verify(secret, ts, header string, body []byte) bool {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || !strings.HasPrefix(header, "v1=") {
		return false
	}
	return hmac.Equal([]byte(Sign(secret, n, body)), []byte(header))
}
