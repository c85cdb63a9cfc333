package chart

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/jsonpath"

	"github.com/sandboxd/sandboxd/config"
)

// secrets serves lookup of v1 Secrets from a fake cluster.
type secrets struct{ c *dynfake.FakeDynamicClient }

func (s secrets) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if apiVersion != "v1" || kind != "Secret" {
		return nil, false, fmt.Errorf("the chart looked up %s %s; only v1 Secrets are served here", apiVersion, kind)
	}
	return s.c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

func clusterWith(objs ...runtime.Object) secrets {
	return secrets{dynfake.NewSimpleDynamicClient(scheme.Scheme, objs...)}
}

// asStored is the Secret as the API server returns it after an install:
// stringData folded into data.
func asStored(o object) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: str(o, "metadata", "name"), Namespace: str(o, "metadata", "namespace")}, Data: map[string][]byte{}}
	sd, _ := get(o, "stringData").(map[string]any)
	for k, v := range sd {
		s.Data[k] = []byte(fmt.Sprint(v))
	}
	return s
}

// TestAdminTenant: with no tenant listed the chart makes tenant admin with
// a random token, stores only its SHA-256 in the config, and NOTES tells
// how to read the token back from the Secret.
func TestAdminTenant(t *testing.T) {
	files, err := renderFiles(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := parseManifests(t, files)
	sec := must(t, objs, "Secret/sd-sandboxd-tenants")
	token := str(sec, "stringData", "admin-token")
	if !regexp.MustCompile(`^[A-Za-z0-9]{40}$`).MatchString(token) {
		t.Fatalf("admin-token = %q, want 40 random letters and digits", token)
	}
	sum := sha256.Sum256([]byte(token))
	cfg := parseConfig(t, objs)
	if len(cfg.Tenants) != 1 || !reflect.DeepEqual(cfg.Tenants[0], config.Tenant{Name: "admin", TokenSHA256: hex.EncodeToString(sum[:])}) {
		t.Errorf("tenants = %v, want admin with the SHA-256 of admin-token", cfg.Tenants)
	}
	if strings.Contains(str(must(t, objs, "ConfigMap/sd-sandboxd"), "data", "config.yaml"), token) {
		t.Error("the ConfigMap holds the admin token")
	}

	// The command NOTES gives, run against the Secret as the API stores it.
	notes := files["sandboxd/templates/NOTES.txt"]
	m := regexp.MustCompile(`kubectl -n (\S+) get secret (\S+) -o jsonpath='([^']+)' \| base64 -d`).FindStringSubmatch(notes)
	if m == nil || m[1] != releaseNS || m[2] != "sd-sandboxd-tenants" {
		t.Fatalf("NOTES.txt does not say how to read the admin token from Secret sd-sandboxd-tenants in %s:\n%s", releaseNS, notes)
	}
	jp := jsonpath.New("notes")
	if err := jp.Parse(m[3]); err != nil {
		t.Fatalf("NOTES' jsonpath %s: %v", m[3], err)
	}
	stored, err := runtime.DefaultUnstructuredConverter.ToUnstructured(asStored(sec))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := jp.Execute(&out, stored); err != nil {
		t.Fatalf("NOTES' jsonpath %s on the Secret: %v", m[3], err)
	}
	if got := out.String(); got != base64.StdEncoding.EncodeToString([]byte(token)) {
		t.Errorf("NOTES' jsonpath reads %q, want the base64 of the admin token", got)
	}

	// Tokens listed: no admin.
	objs = render(t, map[string]any{"tenants": []any{map[string]any{"name": "team-a", "token": "team-a-token-0123456789"}}})
	if get(must(t, objs, "Secret/sd-sandboxd-tenants"), "stringData", "admin-token") != nil {
		t.Error("admin-token made although tenants are listed")
	}
	if cfg := parseConfig(t, objs); len(cfg.Tenants) != 1 || cfg.Tenants[0].Name != "team-a" {
		t.Errorf("tenants = %v, want team-a only", cfg.Tenants)
	}

	// An existing Secret: the chart makes none and mounts that one.
	objs = render(t, map[string]any{"existingTenantsSecret": "mine"})
	if _, ok := objs["Secret/sd-sandboxd-tenants"]; ok {
		t.Error("the chart made a tenants Secret beside existingTenantsSecret")
	}
	pod := get(must(t, objs, "StatefulSet/sd-sandboxd"), "spec", "template", "spec")
	if got := mountedFile(t, pod, get(pod, "initContainers", "0"), "/etc/sandboxd/tenants/tenants.yaml"); got != "Secret mine tenants.yaml tenants.yaml" {
		t.Errorf("the init container reads tenants from %q, want Secret mine", got)
	}
}

// TestGeneratedSecretsKept: the admin token and the peer key are made once;
// an upgrade (lookup finds the Secrets) renders the same ones, so clients
// keep their token and replicas their shared key.
func TestGeneratedSecretsKept(t *testing.T) {
	first := render(t, nil)
	again := render(t, nil)
	token := str(must(t, first, "Secret/sd-sandboxd-tenants"), "stringData", "admin-token")
	key := str(must(t, first, "Secret/sd-sandboxd-peer"), "stringData", "key")
	if token == str(must(t, again, "Secret/sd-sandboxd-tenants"), "stringData", "admin-token") || key == str(must(t, again, "Secret/sd-sandboxd-peer"), "stringData", "key") {
		t.Fatal("two fresh installs got the same admin token or peer key; they must be random")
	}

	cluster := clusterWith(asStored(must(t, first, "Secret/sd-sandboxd-tenants")), asStored(must(t, first, "Secret/sd-sandboxd-peer")))
	files, err := renderFiles(t, nil, cluster)
	if err != nil {
		t.Fatal(err)
	}
	up := parseManifests(t, files)
	if got := str(must(t, up, "Secret/sd-sandboxd-tenants"), "stringData", "admin-token"); got != token {
		t.Errorf("the upgrade's admin token %q, want the installed %q", got, token)
	}
	if got := str(must(t, up, "Secret/sd-sandboxd-peer"), "stringData", "key"); got != key {
		t.Errorf("the upgrade's peer key %q, want the installed %q", got, key)
	}
	// Nor does the pods' checksum move: an upgrade with the same values
	// rolls no replica.
	ann := func(objs map[string]object) any {
		return get(must(t, objs, "StatefulSet/sd-sandboxd"), "spec", "template", "metadata", "annotations")
	}
	if !sameMap(ann(first), ann(up)) {
		t.Errorf("pod annotations changed on an upgrade with the same values: %v then %v", ann(first), ann(up))
	}
}
