package e2b

import (
	"net/http/httptest"
	"testing"
	"time"
)

// The signature is the SDK's (getSignature in e2b's JS SDK): the vector
// was made with Node's crypto the way the SDK makes it.
func TestSignatureIsTheSDKs(t *testing.T) {
	sr := signedRequest{path: "hello.txt", op: "read", expires: "1700000000"}
	if got, want := sr.sign("tok123"), "v1_ypjtsTCbUFTJBN1fSlXTRVVjr19TS+KLnwBtGzvTxzI"; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	sr.signature = sr.sign("tok123")
	if !sr.signedBy("tok123") || sr.signedBy("tok124") {
		t.Error("signedBy does not tell the token that signed")
	}
	for _, tc := range []struct {
		expires string
		expired bool
		bad     bool
	}{
		{"", false, false},
		{"1700000000", true, false},
		{"4102444800", false, false},
		{"soon", false, true},
	} {
		sr.expires = tc.expires
		exp, err := sr.expired(time.Unix(1800000000, 0))
		if exp != tc.expired || (err != nil) != tc.bad {
			t.Errorf("expires %q: expired %v, err %v; want %v, error %v", tc.expires, exp, err, tc.expired, tc.bad)
		}
	}
}

func TestSignedRequestReadsTheURL(t *testing.T) {
	r := httptest.NewRequest("GET", "/files?path=a%2Fb.txt&username=root&signature=v1_x&signature_expiration=12", nil)
	sr, ok := signedOf(r)
	if !ok || sr.path != "a/b.txt" || sr.user != "root" || sr.op != "read" || sr.expires != "12" || sr.signature != "v1_x" {
		t.Fatalf("signedOf = %+v, %v", sr, ok)
	}
	if !isSignedFiles(r) {
		t.Error("a signed /files URL is not recognised")
	}
	r = httptest.NewRequest("POST", "/files?path=x&signature=v1_y", nil)
	if sr, _ := signedOf(r); sr.op != "write" || sr.user != "" {
		t.Errorf("an upload URL reads as %+v, want op write and no user", sr)
	}
	for _, u := range []string{"/files?path=x", "/files?signature=", "/e2b/sandbox/files?signature=v1_z", "/v1/files?signature=v1_z"} {
		if isSignedFiles(httptest.NewRequest("GET", u, nil)) {
			t.Errorf("%s is taken for a signed file URL at the root", u)
		}
	}
}
