package runrecords

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sandboxd/sandboxd/tools"
)

// Labels and data keys of a run record (DESIGN.md §9: fixed names).
const (
	LabelDeployment = "io.sandboxd.deployment"
	LabelKind       = "io.sandboxd.kind"
	LabelTenantHash = "io.sandboxd.tenant-hash"
	KindRun         = "run"
	DataKey         = "run.json"
)

// runIDPrefix starts every run id; the record's name drops it (an
// underscore is not allowed in object names).
const runIDPrefix = "run_"

// TenantHash is the value of LabelTenantHash for tenant: label values are
// short and restricted, tenants need be neither.
func TenantHash(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:])[:20]
}

// recordName is the ConfigMap name of run id in deployment, or "" when id
// cannot be a run id (then no record of it can exist).
func recordName(deployment, id string) string {
	rest, ok := strings.CutPrefix(id, runIDPrefix)
	if !ok || rest == "" {
		return ""
	}
	name := "sandboxd-" + deployment + "-run-" + rest
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return ""
	}
	return name
}

// selector picks the run records of deployment.
func selector(deployment string) string {
	return LabelDeployment + "=" + deployment + "," + LabelKind + "=" + KindRun
}

// encode makes the ConfigMap of run.
func encode(namespace, deployment string, run tools.Run) (*corev1.ConfigMap, error) {
	data, err := json.Marshal(run)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      recordName(deployment, run.ID),
			Namespace: namespace,
			Labels: map[string]string{
				LabelDeployment: deployment,
				LabelKind:       KindRun,
				LabelTenantHash: TenantHash(run.Tenant),
			},
		},
		Data: map[string]string{DataKey: string(data)},
	}, nil
}

// decode reads the run of cm, a record of deployment. A record that is not
// exactly what encode makes (other labels, a name that does not match its
// run, a child run) is refused: it is never served.
func decode(deployment string, cm *corev1.ConfigMap) (tools.Run, error) {
	var run tools.Run
	if cm.Labels[LabelDeployment] != deployment || cm.Labels[LabelKind] != KindRun {
		return run, fmt.Errorf("it does not carry the labels %s", selector(deployment))
	}
	raw, ok := cm.Data[DataKey]
	if !ok {
		return run, fmt.Errorf("it has no data key %s", DataKey)
	}
	if err := json.Unmarshal([]byte(raw), &run); err != nil {
		return tools.Run{}, fmt.Errorf("its %s is not a run: %w", DataKey, err)
	}
	switch {
	case run.Tenant == "":
		return tools.Run{}, fmt.Errorf("its run has no tenant")
	case run.Parent != "":
		return tools.Run{}, fmt.Errorf("its run is a child run, which is never recorded")
	case recordName(deployment, run.ID) != cm.Name:
		return tools.Run{}, fmt.Errorf("its run id %q does not match the name", run.ID)
	case cm.Labels[LabelTenantHash] != TenantHash(run.Tenant):
		return tools.Run{}, fmt.Errorf("its label %s does not match its run's tenant", LabelTenantHash)
	}
	return run, nil
}
