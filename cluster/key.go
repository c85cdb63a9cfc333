package cluster

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/labels"
)

// Key is one conversation: the unit of ownership.
type Key struct {
	Tenant       string
	Conversation string
}

func (k Key) String() string { return k.Tenant + "/" + k.Conversation }

// Labels and annotations on what this package makes in the cluster.
const (
	LabelDeployment = "io.sandboxd.deployment"
	LabelKind       = "io.sandboxd.kind"

	KindConversation = "conversation"
	KindReplica      = "replica"

	AnnotationPeerURL      = "sandboxd.io/peer-url"
	AnnotationReleasing    = "sandboxd.io/releasing"
	AnnotationTenant       = "sandboxd.io/tenant"
	AnnotationConversation = "sandboxd.io/conversation"
)

// LeaseName is the name of key's Lease in deployment dep: tenants and
// conversations may hold characters and lengths no object name allows,
// so the name carries a hash and the raw values go in annotations.
func LeaseName(dep string, k Key) string {
	sum := sha256.Sum256([]byte(k.Tenant + "\x00" + k.Conversation))
	return "sandboxd-" + dep + "-c-" + hex.EncodeToString(sum[:])[:20]
}

// MemberLeaseName is the name of a replica's own Lease, which says that it
// lives and where it is reached.
func MemberLeaseName(dep, identity string) string { return "sandboxd-" + dep + "-r-" + identity }

func kindSelector(kind string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelKind: kind})
}
