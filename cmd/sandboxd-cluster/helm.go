package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmkube "helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// helmConfig is Helm's client for the release namespace, keeping releases
// in Secrets (Helm's default driver).
func helmConfig(kubeconfig, namespace string, log io.Writer) (*action.Configuration, error) {
	cfg := new(action.Configuration)
	logf := func(format string, v ...any) { fmt.Fprintf(log, "helm: "+format+"\n", v...) }
	if err := cfg.Init(helmkube.GetConfig(kubeconfig, "", namespace), namespace, "secret", logf); err != nil {
		return nil, fmt.Errorf("helm's client for namespace %s: %w", namespace, err)
	}
	return cfg, nil
}

// installOrUpgrade installs the release, or upgrades it with exactly vals
// (no values of the previous revision are reused) when it exists. It does
// not wait: the caller waits for the replicas and can say which is not
// ready and why.
func installOrUpgrade(ctx context.Context, cfg *action.Configuration, chrt *chart.Chart, name, namespace string, vals map[string]any, timeout time.Duration) (*release.Release, error) {
	_, err := action.NewHistory(cfg).Run(name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.Timeout = name, namespace, timeout
		rel, err := in.RunWithContext(ctx, chrt, vals)
		if err != nil {
			return nil, fmt.Errorf("helm install %s in %s: %w", name, namespace, err)
		}
		return rel, nil
	case err != nil:
		return nil, fmt.Errorf("the history of release %s in %s: %w", name, namespace, err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Timeout, up.ResetValues, up.MaxHistory = namespace, timeout, true, 5
	rel, err := up.RunWithContext(ctx, name, chrt, vals)
	if err != nil {
		if strings.Contains(err.Error(), "another operation") {
			return nil, fmt.Errorf("helm upgrade %s in %s: %w; an earlier deploy was interrupted: run sandboxd-cluster undeploy, then deploy again", name, namespace, err)
		}
		return nil, fmt.Errorf("helm upgrade %s in %s: %w", name, namespace, err)
	}
	return rel, nil
}

// uninstall removes the release and waits until its objects are gone; a
// release that is not there is no error.
func uninstall(cfg *action.Configuration, name string, timeout time.Duration) (bool, error) {
	if _, err := action.NewHistory(cfg).Run(name); errors.Is(err, driver.ErrReleaseNotFound) {
		return false, nil
	}
	un := action.NewUninstall(cfg)
	un.Wait, un.Timeout, un.IgnoreNotFound = true, timeout, true
	if _, err := un.Run(name); err != nil {
		return false, fmt.Errorf("helm uninstall %s: %w", name, err)
	}
	return true, nil
}
