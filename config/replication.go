package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"time"
)

// Defaults of the replication keys.
const (
	DefaultLeaseDuration = 6 * time.Second
	DefaultRenewInterval = 2 * time.Second
)

// Replication makes sandboxd one of several replicas of a deployment on
// Kubernetes: each conversation with live state is owned by one replica
// through a coordination.k8s.io Lease, requests for a conversation owned
// elsewhere are forwarded to its owner, and runs live in the cluster
// (DESIGN.md §9). It needs the kubernetes backend.
type Replication struct {
	// Enabled turns replication on.
	Enabled bool `yaml:"enabled"`
	// Namespace holds the Leases and the run records (default: the pod's
	// own namespace, from POD_NAMESPACE or the service account).
	Namespace string `yaml:"namespace"`
	// Identity is this replica's holderIdentity in every Lease (default:
	// $POD_NAME, else the host name). Two live replicas must never share it.
	Identity string `yaml:"identity"`
	// AdvertiseURL is how the other replicas reach this one (default:
	// http://$POD_IP:<listen port>, or the listen address when it is a
	// loopback address).
	AdvertiseURL string `yaml:"advertise_url"`
	// LeaseDuration is how long a lease holds without a renewal (default
	// 6s): a dead replica's conversations are taken over after it.
	LeaseDuration Duration `yaml:"lease_duration"`
	// RenewInterval is how often the owner renews its leases (default 2s;
	// at most a third of lease_duration, so two renewals may fail in a row).
	RenewInterval Duration `yaml:"renew_interval"`
	// PeerSecretFile holds the key every replica signs forwarded requests
	// with (at least 32 bytes); a request that claims to come from a peer
	// without a valid signature is refused.
	PeerSecretFile string `yaml:"peer_secret_file"`
}

func (r *Replication) applyDefaults() {
	if r.LeaseDuration == 0 {
		r.LeaseDuration = Duration(DefaultLeaseDuration)
	}
	if r.RenewInterval == 0 {
		r.RenewInterval = Duration(DefaultRenewInterval)
	}
}

// Validate checks the replication keys; the message names the key.
func (r Replication) Validate() error {
	if !r.Enabled {
		return nil
	}
	if r.Namespace != "" && !dnsLabel.MatchString(r.Namespace) {
		return fmt.Errorf("replication.namespace: %q is not a namespace name; use lower-case letters, digits and '-'", r.Namespace)
	}
	if r.LeaseDuration.D() < 2*time.Second {
		return fmt.Errorf("replication.lease_duration: %s is too short; use at least 2s (default %s)", r.LeaseDuration.D(), DefaultLeaseDuration)
	}
	if r.RenewInterval.D() <= 0 || r.RenewInterval.D()*3 > r.LeaseDuration.D() {
		return fmt.Errorf("replication.renew_interval: %s must be positive and at most a third of lease_duration %s, so that two failed renewals in a row still keep the lease", r.RenewInterval.D(), r.LeaseDuration.D())
	}
	if r.AdvertiseURL != "" {
		u, err := url.Parse(r.AdvertiseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("replication.advertise_url: %q is not a base URL; write it like http://10.0.0.7:7788", r.AdvertiseURL)
		}
	}
	if r.PeerSecretFile == "" {
		return fmt.Errorf("replication.peer_secret_file: is empty; replicas sign forwarded requests with a shared key: name a file holding at least 32 random bytes (the chart makes one in a Secret)")
	}
	if !filepath.IsAbs(r.PeerSecretFile) {
		return fmt.Errorf("replication.peer_secret_file: %q is not an absolute path", r.PeerSecretFile)
	}
	return nil
}
