package chart

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// renderErr renders values that must be refused and returns the error.
func renderErr(t *testing.T, vals map[string]any) error {
	t.Helper()
	_, err := renderFiles(t, vals, nil)
	if err == nil {
		t.Fatalf("values %v rendered; want them refused", vals)
	}
	return err
}

// envOf maps the sandboxd container's env names to their value or field.
func envOf(c any) (names []string, field map[string]string) {
	field = map[string]string{}
	env, _ := get(c, "env").([]any)
	for _, e := range env {
		n := str(e, "name")
		names = append(names, n)
		if f := str(e, "valueFrom", "fieldRef", "fieldPath"); f != "" {
			field[n] = f
		} else {
			field[n] = "value:" + str(e, "value")
		}
	}
	return names, field
}

// roleGrants is "group/resource" -> sorted verbs.
func roleGrants(role object) map[string][]string {
	got := map[string][]string{}
	rules, _ := get(role, "rules").([]any)
	for _, r := range rules {
		for _, g := range strs(r, "apiGroups") {
			for _, res := range strs(r, "resources") {
				got[g+"/"+res] = append(got[g+"/"+res], strs(r, "verbs")...)
			}
		}
	}
	for _, v := range got {
		slices.Sort(v)
	}
	return got
}

// TestReplicas: by default sandboxd is two replicas of a StatefulSet that
// share conversations through Leases: each replica knows its name,
// namespace, address and ordinal, mounts the shared peer key the config
// names, may keep Leases and run records in the release namespace, and
// has a headless Service and a PodDisruptionBudget.
func TestReplicas(t *testing.T) {
	objs := render(t, nil)
	sts := must(t, objs, "StatefulSet/sd-sandboxd")
	if _, ok := objs["Deployment/sd-sandboxd"]; ok {
		t.Error("a Deployment is still rendered beside the StatefulSet")
	}
	spec := get(sts, "spec")
	if get(spec, "replicas") != 2 || str(spec, "podManagementPolicy") != "Parallel" || str(spec, "updateStrategy", "type") != "RollingUpdate" {
		t.Errorf("StatefulSet replicas %v, podManagementPolicy %q, updateStrategy %v; want 2, Parallel, RollingUpdate",
			get(spec, "replicas"), str(spec, "podManagementPolicy"), get(spec, "updateStrategy"))
	}
	if sn := str(spec, "serviceName"); sn != "sd-sandboxd-peers" {
		t.Errorf("serviceName = %q, want sd-sandboxd-peers", sn)
	}
	if get(spec, "volumeClaimTemplates") != nil {
		t.Errorf("volumeClaimTemplates = %v; the data dir is an emptyDir", get(spec, "volumeClaimTemplates"))
	}
	pod := get(spec, "template", "spec")
	if g := get(pod, "terminationGracePeriodSeconds"); g != 30 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 30", g)
	}
	c := get(pod, "containers", "0")

	names, field := envOf(c)
	for name, want := range map[string]string{
		"POD_NAME":           "metadata.name",
		"POD_NAMESPACE":      "metadata.namespace",
		"POD_IP":             "status.podIP",
		"SANDBOXD_POD_INDEX": "metadata.labels['apps.kubernetes.io/pod-index']",
	} {
		if field[name] != want {
			t.Errorf("env %s from %q, want the downward API's %s (env %v)", name, field[name], want, names)
		}
	}
	if p := str(c, "terminationMessagePolicy"); p != "FallbackToLogsOnError" {
		t.Errorf("terminationMessagePolicy = %q, want FallbackToLogsOnError so that a crash's last log lines show in the pod's status", p)
	}
	if args := strings.Join(strs(c, "args"), " "); strings.Contains(args, "--listen-add-pod-index") {
		t.Errorf("args %q: off the node's network every replica has its own IP and the same port", args)
	}
	if p := str(c, "readinessProbe", "httpGet", "port"); p != "http" || str(c, "ports", "0", "name") != "http" || get(c, "ports", "0", "containerPort") != 7788 {
		t.Errorf("readiness probe port %q, ports %v; want httpGet on the named port http = 7788", p, get(c, "ports"))
	}

	// The peer key: one Secret, mounted where the config says.
	sec := must(t, objs, "Secret/sd-sandboxd-peer")
	if key := str(sec, "stringData", "key"); !regexp.MustCompile(`^[A-Za-z0-9]{48}$`).MatchString(key) {
		t.Errorf("peer key = %q, want 48 random letters and digits", key)
	}
	cfg := parseConfig(t, objs)
	r := cfg.Replication
	if !r.Enabled || r.Namespace != releaseNS || r.LeaseDuration.D() != 6*time.Second || r.RenewInterval.D() != 2*time.Second || r.Identity != "" || r.AdvertiseURL != "" {
		t.Errorf("config replication = %+v, want enabled in %s, 6s/2s, identity and advertise_url left to sandboxd", r, releaseNS)
	}
	if got := mountedFile(t, pod, c, r.PeerSecretFile); got != "Secret sd-sandboxd-peer key key" {
		t.Errorf("peer_secret_file %s is %q, want key key of Secret sd-sandboxd-peer", r.PeerSecretFile, got)
	}
	for _, m := range get(c, "volumeMounts").([]any) {
		if str(m, "name") == "peer" && get(m, "readOnly") != true {
			t.Errorf("the peer key is mounted writable: %v", m)
		}
	}
	if got := mountedFile(t, pod, c, "/var/lib/sandboxd/x"); got != "emptyDir" {
		t.Errorf("the data dir is %q, want an emptyDir per pod", got)
	}

	// Services: the API's, and the headless one giving each replica a name.
	peers := must(t, objs, "Service/sd-sandboxd-peers")
	if str(peers, "spec", "clusterIP") != "None" || get(peers, "spec", "publishNotReadyAddresses") != true || str(peers, "spec", "ports", "0", "targetPort") != "http" {
		t.Errorf("peers Service spec = %v, want headless, publishing not-ready pods, on port http", get(peers, "spec"))
	}
	if !sameMap(get(peers, "spec", "selector"), get(spec, "selector", "matchLabels")) {
		t.Errorf("peers Service selects %v, the StatefulSet's pods are %v", get(peers, "spec", "selector"), get(spec, "selector", "matchLabels"))
	}

	pdb := must(t, objs, "PodDisruptionBudget/sd-sandboxd")
	if get(pdb, "spec", "maxUnavailable") != 1 || !sameMap(get(pdb, "spec", "selector", "matchLabels"), get(spec, "selector", "matchLabels")) {
		t.Errorf("PodDisruptionBudget spec = %v, want maxUnavailable 1 over the StatefulSet's pods", get(pdb, "spec"))
	}

	// RBAC in the release namespace: Leases and run records, nothing else.
	role := must(t, objs, "Role/sd-sandboxd-replication")
	want := map[string][]string{
		"coordination.k8s.io/leases": {"create", "delete", "get", "list", "patch", "update", "watch"},
		"/configmaps":                {"create", "delete", "get", "list", "update", "watch"},
	}
	if got := roleGrants(role); !sameGrants(got, want) || str(role, "metadata", "namespace") != releaseNS {
		t.Errorf("Role sd-sandboxd-replication in %q grants %v, want %v in %s", str(role, "metadata", "namespace"), got, want, releaseNS)
	}
	rb := must(t, objs, "RoleBinding/sd-sandboxd-replication")
	if str(rb, "roleRef", "name") != "sd-sandboxd-replication" || str(rb, "subjects", "0", "name") != str(pod, "serviceAccountName") || str(rb, "subjects", "0", "namespace") != releaseNS {
		t.Errorf("RoleBinding sd-sandboxd-replication = %v, want the Role bound to the pods' ServiceAccount", rb)
	}
	// The sandbox-namespace rules are still there, unchanged.
	if got := roleGrants(must(t, objs, "Role/sd-sandboxd")); len(got["/pods"]) == 0 || len(got["/pods/exec"]) == 0 {
		t.Errorf("Role sd-sandboxd grants %v, want the sandbox pods' rules", got)
	}
}

// mountedFile names what the container sees at path: "Secret NAME KEY
// PATH-IN-VOLUME" for a Secret item, "emptyDir", or "" when nothing is
// mounted there.
func mountedFile(t *testing.T, pod, c any, path string) string {
	t.Helper()
	mounts, _ := get(c, "volumeMounts").([]any)
	for _, m := range mounts {
		dir := strings.TrimSuffix(str(m, "mountPath"), "/") + "/"
		if !strings.HasPrefix(path, dir) {
			continue
		}
		rest := strings.TrimPrefix(path, dir)
		vols, _ := get(pod, "volumes").([]any)
		for _, v := range vols {
			if str(v, "name") != str(m, "name") {
				continue
			}
			if get(v, "emptyDir") != nil {
				return "emptyDir"
			}
			items, _ := get(v, "secret", "items").([]any)
			for _, it := range items {
				if str(it, "path") == rest {
					return "Secret " + str(v, "secret", "secretName") + " " + str(it, "key") + " " + rest
				}
			}
		}
	}
	return ""
}

func sameMap(a, b any) bool {
	am, _ := a.(map[string]any)
	bm, _ := b.(map[string]any)
	if len(am) == 0 || len(am) != len(bm) {
		return false
	}
	for k, v := range am {
		if bm[k] != v {
			return false
		}
	}
	return true
}

func sameGrants(got, want map[string][]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			return false
		}
	}
	return true
}

// TestReplicaCount: the StatefulSet runs what replicaCount asks, and the
// PodDisruptionBudget exists only where there is a replica to spare.
func TestReplicaCount(t *testing.T) {
	for _, tc := range []struct {
		vals     map[string]any
		replicas int
		pdb      bool
	}{
		{map[string]any{"replicaCount": 1}, 1, false},
		{map[string]any{"replicaCount": 3}, 3, true},
		{map[string]any{"replicaCount": 3, "pdb": map[string]any{"enabled": false}}, 3, false},
	} {
		objs := render(t, tc.vals)
		if n := get(must(t, objs, "StatefulSet/sd-sandboxd"), "spec", "replicas"); n != tc.replicas {
			t.Errorf("values %v: replicas = %v, want %d", tc.vals, n, tc.replicas)
		}
		if _, ok := objs["PodDisruptionBudget/sd-sandboxd"]; ok != tc.pdb {
			t.Errorf("values %v: PodDisruptionBudget rendered %v, want %v", tc.vals, ok, tc.pdb)
		}
	}
}

// Two replicas without replication would fight over every sandbox's agent
// pipe: refused. One replica may run without it, and then nothing of
// replication is rendered.
func TestReplicationOff(t *testing.T) {
	off := map[string]any{"enabled": false}
	err := renderErr(t, map[string]any{"replicaCount": 2, "replication": off})
	if !strings.Contains(err.Error(), "replicaCount 2 needs replication.enabled: true") {
		t.Errorf("two replicas without replication: %v, want a sentence naming replication.enabled", err)
	}

	objs := render(t, map[string]any{"replicaCount": 1, "replication": off, "metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}})
	if cfg := parseConfig(t, objs); cfg.Replication.Enabled {
		t.Errorf("config replication = %+v with replication.enabled false", cfg.Replication)
	}
	for _, k := range []string{"Secret/sd-sandboxd-peer", "Role/sd-sandboxd-replication", "RoleBinding/sd-sandboxd-replication"} {
		if _, ok := objs[k]; ok {
			t.Errorf("%s rendered with replication off", k)
		}
	}
	pod := get(must(t, objs, "StatefulSet/sd-sandboxd"), "spec", "template", "spec")
	if got := mountedFile(t, pod, get(pod, "containers", "0"), "/etc/sandboxd/peer/key"); got != "" {
		t.Errorf("the peer key is mounted (%s) with replication off", got)
	}
	rules, _ := get(must(t, objs, "PrometheusRule/sd-sandboxd"), "spec", "groups", "0", "rules").([]any)
	for _, r := range rules {
		if strings.Contains(str(r, "expr"), replicaMetric) {
			t.Errorf("alert %s watches replica metrics, which a sandboxd without replication never exports", str(r, "alert"))
		}
	}
}

// Values of the chart before replicas keep no meaning: said so, not ignored.
func TestPersistenceRefused(t *testing.T) {
	err := renderErr(t, map[string]any{"persistence": map[string]any{"enabled": true}})
	if !strings.Contains(err.Error(), "persistence is gone from this chart") {
		t.Errorf("persistence values: %v, want a sentence saying persistence is gone", err)
	}
}

// TestAntiAffinity: replicas are spread over nodes softly by default, hard
// or not at all on request, and a user's own affinity replaces all that.
func TestAntiAffinity(t *testing.T) {
	affinity := func(vals map[string]any) any {
		return get(must(t, render(t, vals), "StatefulSet/sd-sandboxd"), "spec", "template", "spec", "affinity")
	}
	selector := get(must(t, render(t, nil), "StatefulSet/sd-sandboxd"), "spec", "selector", "matchLabels")

	soft := get(affinity(nil), "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", "0")
	if str(soft, "podAffinityTerm", "topologyKey") != "kubernetes.io/hostname" || !sameMap(get(soft, "podAffinityTerm", "labelSelector", "matchLabels"), selector) || get(soft, "weight") != 100 {
		t.Errorf("default affinity term = %v, want a preferred anti-affinity on kubernetes.io/hostname over the replicas' labels", soft)
	}
	if a := affinity(nil); get(a, "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution") != nil {
		t.Errorf("default affinity %v requires spreading; a one-node cluster could then run one replica only", a)
	}

	hard := get(affinity(map[string]any{"podAntiAffinity": "hard"}), "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "0")
	if str(hard, "topologyKey") != "kubernetes.io/hostname" || !sameMap(get(hard, "labelSelector", "matchLabels"), selector) {
		t.Errorf("hard affinity term = %v, want a required anti-affinity on kubernetes.io/hostname over the replicas' labels", hard)
	}

	if a := affinity(map[string]any{"podAntiAffinity": "none"}); a != nil {
		t.Errorf("podAntiAffinity none gave affinity %v", a)
	}

	own := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"ai"}}}}},
	}}}
	a := affinity(map[string]any{"affinity": own, "podAntiAffinity": "hard"})
	if get(a, "podAntiAffinity") != nil || str(a, "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", "0", "matchExpressions", "0", "key") != "pool" {
		t.Errorf("the user's affinity gave %v, want exactly it", a)
	}
}

// With several replicas the ServiceMonitor must not match the peers
// Service too, or Prometheus scrapes every replica twice.
func TestServiceMonitorScrapesOnce(t *testing.T) {
	objs := render(t, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
	sel, _ := get(must(t, objs, "ServiceMonitor/sd-sandboxd"), "spec", "selector", "matchLabels").(map[string]any)
	var matched []string
	for key, o := range objs {
		if !strings.HasPrefix(key, "Service/") {
			continue
		}
		labels, _ := get(o, "metadata", "labels").(map[string]any)
		all := len(sel) > 0
		for k, v := range sel {
			if labels[k] != v {
				all = false
			}
		}
		if all {
			matched = append(matched, key)
		}
	}
	if !slices.Equal(matched, []string{"Service/sd-sandboxd"}) {
		t.Errorf("the ServiceMonitor's selector %v matches %v, want only Service/sd-sandboxd", sel, matched)
	}
}
