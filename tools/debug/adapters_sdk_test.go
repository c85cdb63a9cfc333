package debug

import (
	"strings"
	"testing"
)

// Without the Dart SDK in the sandbox, adapters says that the SDK is what is
// missing (its `dart debug_adapter` is the adapter), besides the marker.
func TestAdaptersSayTheDartSDKIsMissing(t *testing.T) {
	p := &probe{bins: map[string]string{"dlv": "/usr/local/bin/dlv"}, markers: map[string][]string{"pubspec.yaml": {"/ws/app"}}}
	text := describeAdapters(p, "/ws/app")
	const want = "- dart (Dart): NOT usable; present: root marker /ws/app/pubspec.yaml; missing: executable (dart not on $PATH: the Dart SDK (for `dart debug_adapter`) is not installed in the sandbox)"
	if !strings.Contains(text+"\n", want+"\n") {
		t.Errorf("adapters:\n%s\nwant the line\n%s", text, want)
	}
	// With dart on $PATH the SDK is not blamed.
	p.bins["dart"] = "/usr/lib/dart/bin/dart"
	if text := describeAdapters(p, "/ws/app"); !strings.Contains(text, "- dart (Dart): usable; present: executable /usr/lib/dart/bin/dart, root marker /ws/app/pubspec.yaml") || strings.Contains(text, "Dart SDK") {
		t.Errorf("adapters with dart present:\n%s", text)
	}
	// The other adapters name their executables only.
	if got := lookupAdapter(adapterDelve).notFound(); got != "dlv not on $PATH" {
		t.Errorf("delve: %q", got)
	}
}
