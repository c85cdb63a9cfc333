//go:build !commithook

package daemon

// commitPoint marks a step of a write_files commit. Only agents built with
// -tags commithook act on it (commithook_on.go, for the crash tests); here
// it is empty and compiles away.
func commitPoint(root, point string) {}
