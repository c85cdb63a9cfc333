package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An E2B sandbox on replicas: the replica that creates it owns it, a call
// on it at another replica (by the id in the path, or in the
// E2b-Sandbox-Id header) reaches the owner, and what E2B knows of it (its
// metadata, its timeout as setTimeout changed it) is what every replica
// reads, from the engine.
func TestClusterE2BCallAtAnotherReplica(t *testing.T) {
	rs := replicas(t)
	call := rs.e2bCall(t)
	tag := "rep-" + randHex(t, 3)
	made := rs.e2bSandbox(t, call, 600, tag)
	sb, err := rs.clients[0].GetSandbox(ctx(t), made.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	owner := rs.owner(t, sb.Conversation)
	if owner != 0 {
		t.Errorf("the sandbox made at replica 0 is owned by replica %d", owner)
	}
	other, third := (owner+1)%3, (owner+2)%3

	type detail struct {
		SandboxID string
		State     string
		EndAt     time.Time
		Metadata  map[string]string
	}
	var got detail
	if code := call(other, "GET", "/e2b/sandboxes/"+made.SandboxID, nil, "", &got); code != 200 || got.State != "running" || got.Metadata["who"] != tag {
		t.Fatalf("GET at replica %d (not the owner): %d %+v", other, code, got)
	}
	envd := map[string]string{"X-Access-Token": made.EnvdAccessToken, "E2b-Sandbox-Id": made.SandboxID, "E2b-Sandbox-Port": "49983"}
	var procs struct{ Processes []any }
	if code := call(other, "POST", "/e2b/sandbox/process.Process/List", envd, `{}`, &procs); code != 200 {
		t.Fatalf("envd's process List at replica %d (not the owner): %d", other, code)
	}
	// A signed download URL names no sandbox: the replica it reaches finds
	// the sandbox by the signature and sends it to the owner.
	up := map[string]string{"X-Access-Token": made.EnvdAccessToken, "E2b-Sandbox-Id": made.SandboxID, "E2b-Sandbox-Port": "49983", "Content-Type": "application/octet-stream"}
	if code := call(other, "POST", "/e2b/sandbox/files?path=/tmp/signed.txt", up, "signed across replicas", nil); code != 200 {
		t.Fatalf("upload at replica %d (not the owner): %d", other, code)
	}
	sum := sha256.Sum256([]byte("/tmp/signed.txt:read::" + made.EnvdAccessToken))
	signed := "/files?" + url.Values{"path": {"/tmp/signed.txt"}, "signature": {"v1_" + base64.RawStdEncoding.EncodeToString(sum[:])}}.Encode()
	resp, err := http.Get(rs.URLs[third] + signed)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "signed across replicas" {
		t.Fatalf("a signed download URL at replica %d: %d %q", third, resp.StatusCode, body)
	}
	if code := call(other, "POST", "/e2b/sandboxes/"+made.SandboxID+"/timeout", nil, `{"timeout":1800}`, nil); code != 204 {
		t.Fatalf("setTimeout at replica %d (not the owner): %d", other, code)
	}
	// A listing is served where it arrives: the third replica reads the
	// metadata and the new end from the engine.
	q := url.Values{"metadata": {url.Values{"who": {tag}}.Encode()}}
	var list []detail
	if code := call(third, "GET", "/e2b/v2/sandboxes?"+q.Encode(), nil, "", &list); code != 200 || len(list) != 1 || list[0].SandboxID != made.SandboxID {
		t.Fatalf("list by metadata at replica %d: %d %+v", third, code, list)
	}
	if left := time.Until(list[0].EndAt); left < 1700*time.Second || left > 1800*time.Second {
		t.Errorf("replica %d reads the end as %s from now; setTimeout(1800) at replica %d set it", third, left.Round(time.Second), other)
	}
	if code := call(third, "DELETE", "/e2b/sandboxes/"+made.SandboxID, nil, "", nil); code != 204 {
		t.Errorf("kill at replica %d: %d", third, code)
	}
	if code := call(other, "GET", "/e2b/sandboxes/"+made.SandboxID, nil, "", nil); code != http.StatusNotFound {
		t.Errorf("GET after the kill: %d", code)
	}
}

// e2bCall returns a caller of the E2B API at replica i with the set's
// token; out is filled from a 2xx answer.
func (rs *replicaSet) e2bCall(t *testing.T) func(replica int, method, path string, hdr map[string]string, body string, out any) int {
	return func(replica int, method, path string, hdr map[string]string, body string, out any) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx(t), method, rs.URLs[replica]+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-KEY", rs.Token)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Logf("%s %s at replica %d: %v", method, path, replica, err)
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if out != nil && resp.StatusCode < 300 && json.Unmarshal(b, out) != nil {
			t.Fatalf("%s %s at replica %d: %d %s", method, path, replica, resp.StatusCode, b)
		}
		return resp.StatusCode
	}
}

// e2bSandbox creates an E2B sandbox at replica 0 with the timeout and
// the metadata who=tag; the test's end deletes it wherever it is.
func (rs *replicaSet) e2bSandbox(t *testing.T, call func(int, string, string, map[string]string, string, any) int, timeout int, tag string) (made struct{ SandboxID, EnvdAccessToken string }) {
	t.Helper()
	body := fmt.Sprintf(`{"templateID":"base","timeout":%d,"metadata":{"who":%q}}`, timeout, tag)
	if code := call(0, "POST", "/e2b/sandboxes", nil, body, &made); code != 201 {
		t.Fatalf("create at replica 0: %d", code)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, cl := range rs.clients {
			if cl.DeleteSandbox(c, made.SandboxID) == nil {
				return
			}
		}
	})
	return made
}

// When the owner of an E2B sandbox dies, the replica that takes it over
// (another, or the owner's pod made again: either starts on an empty data
// dir) opens it with the access token its first owner gave (every replica
// signs with the peer key), reads its metadata and timeout from the
// engine, and takes the timeout.
func TestClusterE2BSandboxOutlivesItsOwner(t *testing.T) {
	rs := replicas(t)
	call := rs.e2bCall(t)
	tag := "rep-" + randHex(t, 3)
	made := rs.e2bSandbox(t, call, 900, tag)
	type detail struct {
		State    string
		EndAt    time.Time
		Metadata map[string]string
	}
	var before detail
	if code := call(0, "GET", "/e2b/sandboxes/"+made.SandboxID, nil, "", &before); code != 200 {
		t.Fatalf("GET at replica 0: %d", code)
	}
	sb, err := rs.clients[0].GetSandbox(ctx(t), made.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	owner := rs.owner(t, sb.Conversation)
	other := (owner + 1) % 3
	zero := int64(0)
	if err := rs.cs.CoreV1().Pods(rs.Namespace).Delete(ctx(t), rs.podOf(t, owner), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	envd := map[string]string{"X-Access-Token": made.EnvdAccessToken, "E2b-Sandbox-Id": made.SandboxID, "E2b-Sandbox-Port": "49983"}
	waitFor(t, time.Minute, "envd answering through another replica with the token from the create", func() error {
		var procs struct{ Processes []any }
		if code := call(other, "POST", "/e2b/sandbox/process.Process/List", envd, `{}`, &procs); code != 200 {
			return fmt.Errorf("process List at replica %d: %d", other, code)
		}
		return nil
	})
	var after detail
	if code := call(other, "GET", "/e2b/sandboxes/"+made.SandboxID, nil, "", &after); code != 200 || after.Metadata["who"] != tag || !after.EndAt.Equal(before.EndAt) {
		t.Fatalf("GET after the failover: %d %+v; before %+v", code, after, before)
	}
	if code := call(other, "POST", "/e2b/sandboxes/"+made.SandboxID+"/timeout", nil, `{"timeout":1}`, nil); code != 204 {
		t.Fatalf("setTimeout(1) after the failover: %d", code)
	}
	waitFor(t, time.Minute, "the new owner killing the sandbox at its timeout", func() error {
		if code := call(other, "GET", "/e2b/sandboxes/"+made.SandboxID, nil, "", nil); code != http.StatusNotFound {
			return fmt.Errorf("GET answers %d", code)
		}
		return nil
	})
	rs.waitAllReady(t, 3*time.Minute)
}
