package config

import (
	"strings"
	"testing"
)

func TestReplicationKeys(t *testing.T) {
	c, err := Parse([]byte("replication:\n  enabled: true\n  peer_secret_file: /etc/sandboxd/peer/key\n  advertise_url: http://10.0.0.7:7788\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Replication.LeaseDuration.D() != DefaultLeaseDuration || c.Replication.RenewInterval.D() != DefaultRenewInterval {
		t.Fatalf("defaults not applied: %+v", c.Replication)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"replication:\n  enabled: true\n", "peer_secret_file: is empty"},
		{"replication:\n  enabled: true\n  peer_secret_file: key\n", "not an absolute path"},
		{"replication:\n  enabled: true\n  peer_secret_file: /k\n  lease_duration: 1s\n", "too short"},
		{"replication:\n  enabled: true\n  peer_secret_file: /k\n  lease_duration: 6s\n  renew_interval: 3s\n", "at most a third"},
		{"replication:\n  enabled: true\n  peer_secret_file: /k\n  advertise_url: 10.0.0.7:7788\n", "not a base URL"},
		{"replication:\n  enabled: true\n  peer_secret_file: /k\n  namespace: Bad_NS\n", "not a namespace name"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Parse([]byte("replication:\n  lease_duration: 1s\n")); err != nil {
		t.Errorf("keys of a disabled replication are not checked, got %v", err)
	}
}
