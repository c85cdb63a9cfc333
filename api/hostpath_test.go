package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestHostPaths(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "checkouts")
	outside := filepath.Join(root, "secret")
	for _, d := range []string{filepath.Join(allowed, "repo"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(allowed, "file"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(allowed, "escape"))
	os.Symlink(filepath.Join(allowed, "repo"), filepath.Join(allowed, "inside"))
	// A sibling whose name starts like the allowed dir is not under it.
	os.MkdirAll(allowed+"-evil", 0o755)

	h := HostPaths{Allowed: []string{allowed}, AnyForTenant: "admin"}
	for _, tc := range []struct {
		tenant, path, want, code, msg string
	}{
		{"acme", filepath.Join(allowed, "repo"), filepath.Join(allowed, "repo"), "", ""},
		{"acme", allowed, allowed, "", ""},
		{"acme", filepath.Join(allowed, "inside"), filepath.Join(allowed, "repo"), "", ""},
		{"acme", "checkouts/repo", "", "invalid_argument", "not absolute"},
		{"acme", allowed + "/repo/", "", "invalid_argument", "clean form"},
		{"acme", allowed + "/x/../repo", "", "invalid_argument", "clean form"},
		{"acme", outside, "", "failed_precondition", "allowed_host_paths"},
		{"acme", allowed + "-evil", "", "failed_precondition", "allowed_host_paths"},
		{"acme", filepath.Join(allowed, "escape"), "", "failed_precondition", "resolves to"},
		{"acme", filepath.Join(allowed, "missing"), "", "invalid_argument", "does not exist"},
		{"acme", filepath.Join(allowed, "file"), "", "invalid_argument", "not a directory"},
		{"acme", "/etc/does-not-exist", "", "failed_precondition", "allowed_host_paths"}, // no probing outside
		{"admin", outside, outside, "", ""},
		{"admin", "relative", "", "invalid_argument", "not absolute"},
	} {
		got, err := h.Check(tc.tenant, tc.path)
		if tc.code == "" {
			if err != nil || got != tc.want {
				t.Errorf("%s %s: %q, %v; want %q", tc.tenant, tc.path, got, err, tc.want)
			}
			continue
		}
		if err == nil || errdefs.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s %s: %v (%s); want %s with %q", tc.tenant, tc.path, err, errdefs.Code(err), tc.code, tc.msg)
		}
	}
	// With no allowed paths and no config-less admin, nothing is allowed.
	if _, err := (HostPaths{}).Check("admin", allowed); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty allow-list: %v", err)
	}
}

func TestCreateSandboxWithHostPath(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, WithHostPaths(HostPaths{Allowed: []string{dir}}))
	var sb Sandbox
	h.must("POST", "/v1/sandboxes", tokenA, `{"conversation":"c1","workspace":{"host_path":"`+dir+`"}}`, 201, &sb)
	if h.sb.lastSpec.HostWorkspace != dir || sb.Workspace != dir {
		t.Errorf("spec %+v, sandbox %+v", h.sb.lastSpec, sb)
	}
	a := h.do("POST", "/v1/sandboxes", tokenA, `{"conversation":"c2","workspace":{"host_path":"/etc"}}`)
	if a.status != 412 || a.errBody(t).Code != "failed_precondition" {
		t.Errorf("outside path: %d %s", a.status, a.body)
	}
	a = h.do("POST", "/v1/sandboxes", tokenA, `{"conversation":"c2","workspace":{}}`)
	if a.status != 400 || !strings.Contains(a.errBody(t).Message, "host_path is empty") {
		t.Errorf("empty host_path: %d %s", a.status, a.body)
	}
}
