package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/cluster"
	"github.com/sandboxd/sandboxd/e2b"
	"github.com/sandboxd/sandboxd/errdefs"
)

// e2bOption builds the E2B API (package e2b) over the leaves and mounts it
// on the API server under /e2b; nil when the config turns it off. The
// handler (its migration of old records, its in-sandbox API's timers) is
// closed with the leaves.
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
		User: cfg.E2B.User, NoSudo: cfg.E2B.NoSudo,
		DataDir: lv.flags.dataDir, Auth: lv.auth, Sandboxes: lv.mgr,
		MaxLive: cfg.Processes.MaxRunning, RingBytes: cfg.Processes.RingBytes, Ports: lv.e2bPorts(),
		Hold: lv.e2bHold(),
		Log:  lv.log.With("component", "e2b"),
	})
	if err != nil {
		return nil, err
	}
	lv.onClose(func() { h.Close() })
	lv.e2b = h
	return api.WithE2B(func(s *api.Server) http.Handler {
		h.SetHost(s)
		return h
	}, h.Owns), nil
}

// e2bHold makes this replica the owner of an E2B create's (or fork's)
// fresh conversation, as the router does for a create through /v1; nil
// without replication.
func (lv *leaves) e2bHold() func(ctx context.Context, tenant, conv string) (func(), error) {
	if lv.rep == nil {
		return nil
	}
	return func(ctx context.Context, tenant, conv string) (func(), error) {
		route, err := lv.rep.owners.Resolve(ctx, cluster.Key{Tenant: tenant, Conversation: conv}, true)
		if err != nil {
			return nil, err
		}
		if !route.Local {
			return nil, errdefs.Unavailable("conversation %s is another replica's; retry the create", conv)
		}
		return route.Done, nil
	}
}
