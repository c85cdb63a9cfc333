package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A snapshot on Kubernetes holds a sandbox's workspace only: no image can
// be committed from a pod. It is a PersistentVolumeClaim of the workspace
// claims' class and size, named sandboxd-<deployment>-<snapshot id>, whose
// directory "workspace" holds the tree. Taking one streams the workspace
// through sandboxd: `sandbox-agent archive --freeze` in the sandbox (every
// other process of the sandbox stopped while it reads) into `sandbox-agent
// extract` in a loader pod that mounts the new claim and is deleted after.
// A sandbox made from a snapshot gets an init container that copies the
// tree into its workspace before the agent starts. The claim is marked
// "making" until the copy is whole: a half-made one is never listed, and
// is deleted by a listing once it is older than snapshotTimeout (another
// replica may be taking it right now).

// Labels and annotations of a snapshot's claim.
const (
	// LabelSnapshot is the snapshot id, on its claim and its loader pod.
	LabelSnapshot = "io.sandboxd.snapshot"
	// annotSnapshotOf is the sandbox it was taken of.
	annotSnapshotOf     = "io.sandboxd.snapshot-of"
	annotSnapshotName   = "io.sandboxd.snapshot-name"
	annotSnapshotSize   = "io.sandboxd.snapshot-size"
	annotSnapshotMade   = "io.sandboxd.snapshot-created"
	annotSnapshotMaking = "io.sandboxd.snapshot-making"
)

const (
	// snapshotMount is where a loader pod or a restoring init container
	// mounts a snapshot's claim; its tree is in snapshotTree there.
	snapshotMount  = "/snapshot"
	snapshotTree   = snapshotMount + "/workspace"
	snapshotVolume = "snapshot"
	// restoreContainer is the init container that fills a workspace from
	// a snapshot.
	restoreContainer = "restore"
	// snapshotTimeout bounds taking one snapshot, loader start included.
	snapshotTimeout = 30 * time.Minute
	// stderrKeep is how much of a copier's stderr an error message quotes.
	stderrKeep = 2 << 10
)

var _ sandbox.Snapshotter = (*Backend)(nil)

// snapshotClaimName is the name of snapshot snapID's claim and loader.
func (b *Backend) snapshotClaimName(snapID string) string {
	return NamePrefix + b.dep.Name + "-" + snapID
}

// validSnapID reports whether s is a snapshot id this backend makes.
func validSnapID(s string) bool {
	id, ok := strings.CutPrefix(s, "snap-")
	return ok && validID(id)
}

// noSnapshotStore refuses a snapshot where there is no class to keep one.
func noSnapshotStore() error {
	return errdefs.FailedPrecondition("the kubernetes backend keeps each snapshot on a PersistentVolumeClaim of the workspace claims' storage class; configure kubernetes.workspace_claim (storage_class and size) to take snapshots")
}

// Snapshot copies sandbox id's workspace into a new snapshot claim.
func (b *Backend) Snapshot(ctx context.Context, id string, req sandbox.SnapshotRequest) (sandbox.Snapshot, error) {
	if !b.claimsOn() {
		return sandbox.Snapshot{}, noSnapshotStore()
	}
	o, err := b.find(ctx, id)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	if o.claim != nil {
		return sandbox.Snapshot{}, errdefs.FailedPrecondition("sandbox %s is hibernated, and a snapshot on Kubernetes is read from its running pod; resume it, then take the snapshot", id)
	}
	src := o.pod
	if mapState(src) != sandbox.StateRunning {
		return sandbox.Snapshot{}, errdefs.FailedPrecondition("sandbox %s is not running (%s), so its workspace cannot be read; delete it", id, whyNotRunning(src))
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()

	snapID := "snap-" + newID()
	name := b.snapshotClaimName(snapID)
	created := time.Now().UTC()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: b.namespace,
			Labels: map[string]string{
				sandbox.LabelDeployment: b.dep.Name,
				LabelSnapshot:           snapID,
				sandbox.LabelTenant:     labelValue(req.Tenant),
			},
			Annotations: map[string]string{
				sandbox.LabelTenant:       req.Tenant,
				sandbox.LabelConversation: src.Annotations[sandbox.LabelConversation],
				annotSnapshotOf:           id,
				annotSnapshotName:         req.Name,
				annotSnapshotMade:         created.Format(time.RFC3339Nano),
				annotSnapshotMaking:       "true",
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: b.claimSize}},
		},
	}
	if b.claimClass != "" {
		class := b.claimClass
		claim.Spec.StorageClassName = &class
	}
	made, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return sandbox.Snapshot{}, apiErr("create the claim of a snapshot ("+b.claimSpec+" of storage class "+classOrDefault(b.claimClass)+")", err)
	}
	ok := false
	defer func() {
		if !ok {
			b.dropClaim(ctx, made)
		}
	}()
	loader := b.loaderPod(made, src)
	if _, err := b.cs.CoreV1().Pods(b.namespace).Create(ctx, loader, metav1.CreateOptions{}); err != nil {
		return sandbox.Snapshot{}, apiErr("create the loader pod of a snapshot", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := b.deletePod(dctx, loader); err != nil {
			b.log.Warn("cannot delete a snapshot's loader pod", "pod", loader.Name, "err", err)
		}
	}()
	if _, err := b.waitRunning(ctx, loader.Name); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("start the loader pod of a snapshot of sandbox %s: %w", id, err)
	}
	size, err := b.streamWorkspace(ctx, src.Name, loader.Name)
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("copy the workspace of sandbox %s into snapshot %s: %w", id, snapID, err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:%q}}}`, annotSnapshotMaking, annotSnapshotSize, strconv.FormatInt(size, 10))
	done, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return sandbox.Snapshot{}, apiErr("record snapshot "+snapID+" as whole", err)
	}
	ok = true
	return b.snapshotOf(done), nil
}

// loaderPod is the pod that extracts a snapshot into claim: the agent's
// image doing nothing until sandboxd execs `extract` into it, on the node
// of the sandbox it copies (so that the new claim is bound where the
// restored sandboxes' pods can follow it), as root with only the capabilities that keep owners and
// modes.
func (b *Backend) loaderPod(claim *corev1.PersistentVolumeClaim, src *corev1.Pod) *corev1.Pod {
	no := false
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      claim.Name,
			Namespace: b.namespace,
			Labels:    map[string]string{sandbox.LabelDeployment: b.dep.Name, LabelSnapshot: claim.Labels[LabelSnapshot]},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			Affinity:                      onNode(src.Spec.NodeName),
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           b.agentImage,
				ImagePullPolicy: b.pullPolicy,
				Command:         []string{AgentSource, "hold"},
				VolumeMounts:    []corev1.VolumeMount{{Name: snapshotVolume, MountPath: snapshotMount}},
				Resources:       corev1.ResourceRequirements{Limits: copierLimits(), Requests: initLimits()},
				SecurityContext: copierSecurity(),
			}},
			Volumes: []corev1.Volume{{Name: snapshotVolume, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
			}}},
		},
	}
	ownedBy(p, claim)
	return p
}

// onNode pins a pod to node through the scheduler (not spec.nodeName,
// which would skip the binding of a WaitForFirstConsumer claim).
func onNode(node string) *corev1.Affinity {
	if node == "" {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// copierLimits bound a loader or restore container: enough CPU that a
// large workspace is copied at disk speed.
func copierLimits() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	}
}

// copierSecurity runs a copier as root with the capabilities that set
// owners and modes of files it does not own, nothing else.
func copierSecurity() *corev1.SecurityContext {
	no, root := false, int64(0)
	return &corev1.SecurityContext{
		RunAsUser:                &root,
		RunAsNonRoot:             &no,
		AllowPrivilegeEscalation: &no,
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"},
		},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// streamWorkspace runs `sandbox-agent archive --freeze` in pod src and
// `sandbox-agent extract` in the loader, the first's output into the
// second's input, and answers the bytes of file data copied.
func (b *Backend) streamWorkspace(ctx context.Context, src, loader string) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	archiveErr := &capped{max: stderrKeep}
	var wg sync.WaitGroup
	var srcErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		srcErr = b.execIn(ctx, src, []string{AgentPath, "archive", "--freeze", Workspace}, nil, pw, archiveErr)
		pw.CloseWithError(srcErr)
	}()
	var out bytes.Buffer
	extractErr := &capped{max: stderrKeep}
	dstErr := b.execIn(ctx, loader, []string{AgentSource, "extract", snapshotTree}, pr, &out, extractErr)
	pr.CloseWithError(io.ErrClosedPipe)
	if dstErr != nil {
		cancel()
	}
	wg.Wait()
	switch {
	case srcErr != nil:
		return 0, fmt.Errorf("reading it failed: %v%s", srcErr, quote(archiveErr))
	case dstErr != nil:
		return 0, fmt.Errorf("writing it failed: %v%s", dstErr, quote(extractErr))
	}
	var entries, size int64
	if _, err := fmt.Sscan(out.String(), &entries, &size); err != nil {
		return 0, fmt.Errorf("the loader answered %q, not its counts", out.String())
	}
	return size, nil
}

// execIn runs argv in pod's sandbox container.
func (b *Backend) execIn(ctx context.Context, pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	ex, err := b.executor(pod, argv, stdin != nil)
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// capped keeps the first max bytes written to it.
type capped struct {
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// quote is ": " and what a copier said on stderr, or nothing.
func quote(c *capped) string {
	s := strings.TrimSpace(c.buf.String())
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// Snapshots lists the deployment's whole snapshots, and deletes the
// half-made ones older than snapshotTimeout.
func (b *Backend) Snapshots(ctx context.Context) ([]sandbox.Snapshot, error) {
	l, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: sandbox.LabelDeployment + "=" + b.dep.Name + "," + LabelSnapshot,
	})
	if err != nil {
		return nil, apiErr("list snapshot claims", err)
	}
	var out []sandbox.Snapshot
	for i := range l.Items {
		c := &l.Items[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		if c.Annotations[annotSnapshotMaking] != "" {
			if time.Since(c.CreationTimestamp.Time) > snapshotTimeout+time.Minute {
				b.log.Info("deleting a snapshot left half-made", "claim", c.Name)
				if err := b.deleteClaim(ctx, c.Name); err != nil {
					b.log.Warn("cannot delete a half-made snapshot", "claim", c.Name, "err", err)
				}
			}
			continue
		}
		out = append(out, b.snapshotOf(c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// SnapshotOf reads snapshot snapID; one half-made is NotFound.
func (b *Backend) SnapshotOf(ctx context.Context, snapID string) (sandbox.Snapshot, error) {
	c, err := b.snapshotClaim(ctx, snapID)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	return b.snapshotOf(c), nil
}

// snapshotClaim is snapshot snapID's claim, whole.
func (b *Backend) snapshotClaim(ctx context.Context, snapID string) (*corev1.PersistentVolumeClaim, error) {
	notFound := errdefs.NotFound("snapshot %s does not exist", snapID)
	if !validSnapID(snapID) {
		return nil, notFound
	}
	c, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Get(ctx, b.snapshotClaimName(snapID), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, notFound
	case err != nil:
		return nil, apiErr("get snapshot "+snapID, err)
	case c.Labels[sandbox.LabelDeployment] != b.dep.Name || c.Labels[LabelSnapshot] != snapID || c.DeletionTimestamp != nil:
		return nil, notFound
	case c.Annotations[annotSnapshotMaking] != "":
		return nil, errdefs.NotFound("snapshot %s is still being taken, or was left half-made", snapID)
	}
	return c, nil
}

// DeleteSnapshot deletes snapshot snapID's claim (its files go once no
// sandbox being made from it still mounts it).
func (b *Backend) DeleteSnapshot(ctx context.Context, snapID string) error {
	if !validSnapID(snapID) {
		return errdefs.NotFound("snapshot %s does not exist", snapID)
	}
	return b.deleteClaim(ctx, b.snapshotClaimName(snapID))
}

// snapshotOf reads a snapshot's claim.
func (b *Backend) snapshotOf(c *corev1.PersistentVolumeClaim) sandbox.Snapshot {
	a := c.Annotations
	created, err := time.Parse(time.RFC3339Nano, a[annotSnapshotMade])
	if err != nil {
		created = c.CreationTimestamp.UTC()
	}
	size, _ := strconv.ParseInt(a[annotSnapshotSize], 10, 64)
	return sandbox.Snapshot{
		ID:           c.Labels[LabelSnapshot],
		Tenant:       a[sandbox.LabelTenant],
		Sandbox:      a[annotSnapshotOf],
		Conversation: a[sandbox.LabelConversation],
		Name:         a[annotSnapshotName],
		CreatedAt:    created,
		SizeBytes:    size,
		Holds:        sandbox.HoldsWorkspace,
	}
}

// restoreFrom makes pod fill its workspace from snapshot snapID's claim
// before its agent starts: an init container running `sandbox-agent
// restore` with the claim mounted read-only.
func restoreFrom(pod *corev1.Pod, claimName string) {
	var workspace corev1.VolumeMount
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == workspaceVolume && m.MountPath == Workspace {
				workspace = m
			}
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: snapshotVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName, ReadOnly: true},
	}})
	agentDir := path.Dir(AgentPath)
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
		Name:            restoreContainer,
		Image:           pod.Spec.InitContainers[0].Image,
		ImagePullPolicy: pod.Spec.InitContainers[0].ImagePullPolicy,
		Command:         []string{AgentPath, "restore", snapshotTree, Workspace},
		VolumeMounts: []corev1.VolumeMount{
			{Name: agentVolume, MountPath: agentDir, ReadOnly: true},
			{Name: snapshotVolume, MountPath: snapshotMount, ReadOnly: true},
			workspace,
		},
		Resources:       corev1.ResourceRequirements{Limits: copierLimits(), Requests: initLimits()},
		SecurityContext: copierSecurity(),
	})
}
