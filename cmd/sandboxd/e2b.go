package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/e2b"
)

// e2bOption builds the E2B API (package e2b) over the leaves and mounts it
// on the API server under /e2b; nil when the config turns it off. The
// handler's timeout loop is closed with the leaves.
func (lv *leaves) e2bOption() (api.Option, error) {
	cfg := lv.cfg
	if cfg.E2B.Disabled {
		return nil, nil
	}
	var secret []byte
	if rc := cfg.Replication; rc.Enabled && rc.PeerSecretFile != "" {
		key, err := os.ReadFile(rc.PeerSecretFile)
		if err != nil {
			return nil, fmt.Errorf("E2B access tokens are signed with the peer secret, which cannot be read: %w", err)
		}
		secret = []byte(strings.TrimSpace(string(key)))
	}
	h, err := e2b.New(e2b.Config{
		Secret:    secret,
		Templates: cfg.E2BTemplates(), Domain: cfg.E2B.Domain, PublicPorts: cfg.E2B.PublicPorts, Network: cfg.E2B.Network,
		DataDir: lv.flags.dataDir, Auth: lv.auth, Sandboxes: lv.mgr,
		MaxLive: cfg.Processes.MaxRunning, RingBytes: cfg.Processes.RingBytes, Ports: lv.e2bPorts(),
		Log: lv.log.With("component", "e2b"),
	})
	if err != nil {
		return nil, err
	}
	lv.onClose(func() { h.Close() })
	return api.WithE2B(func(s *api.Server) http.Handler {
		h.SetHost(s)
		return h
	}, h.OwnsHost), nil
}
