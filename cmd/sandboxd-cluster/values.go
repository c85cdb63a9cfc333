package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// tenant is the one tenant deploy configures.
const tenant = "e2e"

// chartValues are the chart's values for the test cluster: sandboxd from
// the images imported into the node (no pull), on the node's loopback
// (hostNetwork; replica i at port+i) with the API server's own address,
// because that cluster has no kube-proxy and so no route from a pod to
// the kubernetes Service; small requests for a 2-core node; the sandboxes
// in the release namespace. The same as e2e/helm_cluster_test.go's.
func chartValues(o options, apiServer, token string) (map[string]any, error) {
	host, port, err := apiHostPort(apiServer)
	if err != nil {
		return nil, err
	}
	repo, tag, ok := strings.Cut(o.image, ":")
	if !ok || strings.Contains(tag, "/") {
		repo, tag = o.image, "latest"
	}
	return map[string]any{
		"replicaCount": o.replicas,
		"deployment":   o.release,
		"image":        map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
		"tenants":      []any{map[string]any{"name": tenant, "token": token}},
		"defaultImage": o.defaultImage,
		"service":      map[string]any{"port": o.port},
		"hostNetwork":  true,
		"extraEnv": []any{
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": host},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": port},
		},
		"sandboxes": map[string]any{
			"imagePullPolicy": "Never",
			"requests":        map[string]any{"cpus": 0.05, "memoryMB": 64},
		},
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "50m", "memory": "64Mi"},
			"limits":   map[string]any{"cpu": "1", "memory": "1Gi"},
		},
	}, nil
}

// apiHostPort splits the kubeconfig's server URL into what a pod on the
// node's network dials.
func apiHostPort(server string) (host, port string, err error) {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return "", "", fmt.Errorf("the kubeconfig's server %q is not a URL", server)
	}
	port = u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return u.Hostname(), port, nil
}

// urls are the replica slots' addresses: the same slot keeps its URL when
// its pod is replaced (same ordinal, same port).
func urls(o options) []string {
	out := make([]string, o.replicas)
	for i := range out {
		out[i] = "http://" + net.JoinHostPort("127.0.0.1", fmt.Sprint(o.port+i))
	}
	return out
}

// newToken is a fresh tenant token (48 hex digits).
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
