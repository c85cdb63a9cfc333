package envd

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLookupPasswd(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/root:/bin/bash\n# a comment\nbroken line\nuser:x:1000:1000::/home/user/:/bin/bash\r\nodd:x:1001:1001::relative:/bin/sh")
	for _, tc := range []struct {
		name      string
		want      account
		wantFound bool
	}{
		{"user", account{name: "user", uid: "1000", home: "/home/user"}, true},
		{"1000", account{name: "user", uid: "1000", home: "/home/user"}, true},
		{"root", account{name: "root", uid: "0", home: "/root"}, true},
		{"odd", account{name: "odd", uid: "1001", home: "/"}, true},
		{"nobody", account{}, false},
		{"broken line", account{}, false},
	} {
		got, ok := lookupPasswd(passwd, tc.name)
		if got != tc.want || ok != tc.wantFound {
			t.Errorf("%q: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.wantFound)
		}
	}
	if u := (account{uid: "0"}).agentUser(); u != "" {
		t.Errorf("root runs as %q, want the agent's own credentials", u)
	}
	if u := (account{name: "user", uid: "1000"}).agentUser(); u != "1000" {
		t.Errorf("user runs as %q, want its uid", u)
	}
}

func TestRequestUser(t *testing.T) {
	basic := func(s string) http.Header {
		return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(s))}}
	}
	for _, tc := range []struct {
		url  string
		hdr  http.Header
		want string
	}{
		{"/process.Process/Start", basic("root:"), "root"},
		{"/process.Process/Start", basic("user"), "user"},
		{"/process.Process/Start", http.Header{"Authorization": {"Bearer tok"}}, ""},
		{"/process.Process/Start", http.Header{"Authorization": {"Basic !!!"}}, ""},
		{"/files?path=a&username=root", nil, "root"},
		{"/files?path=a", nil, ""},
	} {
		r := httptest.NewRequest("POST", tc.url, nil)
		for k, v := range tc.hdr {
			r.Header[k] = v
		}
		if got := requestUser(r); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.url, tc.hdr, got, tc.want)
		}
	}
}

func TestAccountAbs(t *testing.T) {
	a := account{home: "/home/user"}
	for in, want := range map[string]string{
		"x.txt": "/home/user/x.txt", "a/../b": "/home/user/b", "~": "/home/user", "~/c": "/home/user/c",
		"/etc/hosts": "/etc/hosts", "/tmp/../etc": "/etc", "": "/home/user",
	} {
		if got := a.abs(in); got != want {
			t.Errorf("abs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMetadataHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("X-Metadata-Author", "ada")
	h.Set("x-metadata-purpose", "upload")
	h.Set("Content-Type", "text/plain")
	attrs, meta, err := metadataOf(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta) != 2 || meta["author"] != "ada" || meta["purpose"] != "upload" || attrs["user.e2b.author"] != "ada" || len(attrs) != 2 {
		t.Errorf("metadata %v, attrs %v", meta, attrs)
	}
	if a, m, err := metadataOf(http.Header{"Accept": {"*/*"}}); a != nil || m != nil || err != nil {
		t.Errorf("no metadata headers gave %v %v %v", a, m, err)
	}
	for name, hdr := range map[string]http.Header{
		"no key":     {"X-Metadata-": {"v"}},
		"twice":      {"X-Metadata-K": {"a", "b"}},
		"long value": {"X-Metadata-K": {string(make([]byte, maxMetadataValue+1))}},
	} {
		if _, _, err := metadataOf(hdr); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
}
