package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/sandboxd/sandboxd/errdefs"
)

// MaxDeploymentLen caps a deployment name: it must fit a Kubernetes label
// value (63) and, with the "sandboxd-" prefix and a 12-digit id, a pod name
// that is also a valid host name (63).
const MaxDeploymentLen = 40

// DefaultDeploymentName is the deployment of a backend that was given none
// (tests and embedders); sandboxd itself always names one.
const DefaultDeploymentName = "default"

// Deployment is the sandboxd deployment a backend works for. Deployments
// sharing one engine never see each other's sandboxes: every sandbox
// carries its deployment's Name in LabelDeployment, and each deployment
// lists, adopts, reaps and deletes only the sandboxes it Owns. Replicas of
// one deployment share its Name.
type Deployment struct {
	// Name is the value of LabelDeployment on every sandbox the deployment
	// makes; see ValidateDeployment.
	Name string
	// AdoptUnlabelled makes the deployment also own the sandboxes that carry
	// no LabelDeployment: those made by a sandboxd from before deployments.
	// Turn it on in exactly one deployment per engine, the one that made
	// them; off (the default), such sandboxes are nobody's and left alone.
	AdoptUnlabelled bool
}

// Owns tells whether a sandbox with these labels belongs to d.
func (d Deployment) Owns(labels map[string]string) bool {
	v := labels[LabelDeployment]
	if v == "" {
		return d.AdoptUnlabelled
	}
	return v == d.Name
}

// OrDefault is d, named DefaultDeploymentName when it has no name.
func (d Deployment) OrDefault() Deployment {
	if d.Name == "" {
		d.Name = DefaultDeploymentName
	}
	return d
}

// ValidateDeployment checks a deployment name: 1 to MaxDeploymentLen
// lower-case letters, digits and '-', starting and ending with a letter or
// digit (a DNS label, so it fits Docker, containerd and Kubernetes labels
// and Kubernetes object names alike).
func ValidateDeployment(name string) error {
	ok := name != "" && len(name) <= MaxDeploymentLen && name[0] != '-' && name[len(name)-1] != '-'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return errdefs.InvalidArgument("deployment name %s is invalid: use 1 to %d lower-case letters, digits or '-', starting and ending with a letter or digit",
			quoteShort(name), MaxDeploymentLen)
	}
	return nil
}

// DeploymentForDataDir is the default deployment name of a sandboxd
// started with dataDir: "dir-" and a short hash of its absolute path (after
// symlinks, when it exists), so the same data dir always names the same
// deployment and two data dirs never share one.
func DeploymentForDataDir(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", errdefs.InvalidArgument("data dir %s has no absolute path: %v", quoteShort(dataDir), err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	sum := sha256.Sum256([]byte(abs))
	return "dir-" + hex.EncodeToString(sum[:])[:12], nil
}
