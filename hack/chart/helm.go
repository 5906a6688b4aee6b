package main

import (
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// HelmActions are the Helm actions Helm runs against a cluster (-helm), as the helm command
// runs them: install, upgrade and uninstall.
var HelmActions = []string{"install", "upgrade", "uninstall"}

// Helm runs one Helm action against the cluster of kubeconfig with Helm's own code (the
// helm command is not needed), as `helm <op> <name> <chartDir> -n <ns> -f <values> --wait
// --timeout <timeout>` would (Helm's wait: the release's Deployments available, or, on
// uninstall, its objects gone); uninstall ignores chartDir and vals. Install creates ns and
// installs the chart's crds/; upgrade is Helm's three-way merge of the previous release's
// manifest, the new one and the live objects, with vals as the whole set of values (as
// --reset-values). A timeout of 0 does not wait. It returns a one-line summary (release,
// revision, status). Errors come from Helm; an unknown op is an error naming HelmActions.
func Helm(op, kubeconfig, chartDir, name, ns string, vals map[string]any, timeout time.Duration) (string, error) {
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		return "", err
	}
	switch op {
	case "install", "upgrade":
		ch, err := loader.Load(chartDir)
		if err != nil {
			return "", err
		}
		if op == "install" {
			inst := action.NewInstall(cfg)
			inst.ReleaseName, inst.Namespace, inst.CreateNamespace = name, ns, true
			inst.Wait, inst.Timeout = timeout > 0, timeout
			rel, err := inst.Run(ch, vals)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s: revision %d %s (chart %s)", rel.Name, rel.Version, rel.Info.Status, ch.Metadata.Version), nil
		}
		up := action.NewUpgrade(cfg)
		up.Namespace, up.ResetValues = ns, true
		up.Wait, up.Timeout = timeout > 0, timeout
		rel, err := up.Run(name, ch, vals)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: revision %d %s (chart %s)", rel.Name, rel.Version, rel.Info.Status, ch.Metadata.Version), nil
	case "uninstall":
		un := action.NewUninstall(cfg)
		un.Wait, un.Timeout = timeout > 0, timeout
		res, err := un.Run(name)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: uninstalled", res.Release.Name), nil
	}
	return "", fmt.Errorf("-helm: %q is not one of %v", op, HelmActions)
}
