package policy

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// BoundsWarnings returns the warnings for a namespace (tenant) policy that decides beyond the
// bounds of a root policy, as the validating webhook gives them at apply, each prefixed with
// the tenant's field path and naming the root policy, for example "spec.retry.window:
// 8760h0m0s is above maxWindow 10m0s of root policy npp-system/platform for
// Kubernetes-HostPort; the webhook caps it to 10m0s for the pods both select".
//
// roots are the policies of the root namespace (those without spec.bounds, and Audit ones,
// whose bounds do not apply, are ignored);
// namespaceLabels are the labels of the tenant's namespace, for the roots' namespaceSelector;
// plugins are the registered plugins, to see that an alias and a name overlap (empty: only
// equal entries and "*" overlap). A tenant in rootNamespace gets no warning: root policies are
// not capped. The comparison is static: the roots' podSelector and matchConditions are not
// evaluated, so a warning says "for the pods both select". Unset tenant retry fields count
// with their defaults when the tenant sets spec.retry.
func BoundsWarnings(tenant *v1alpha1.NetworkPluginPolicy, rootNamespace string, roots []v1alpha1.NetworkPluginPolicy,
	namespaceLabels map[string]string, plugins []Plugin) []string {
	if tenant.Namespace == rootNamespace {
		return nil
	}
	var out []string
	spec := &tenant.Spec
	for i := range roots {
		root := &roots[i]
		b := root.Spec.Bounds
		if b == nil || root.Namespace != rootNamespace || isAudit(root) {
			continue
		}
		if sel := root.Spec.NamespaceSelector; sel != nil {
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil || !s.Matches(labels.Set(namespaceLabels)) {
				continue
			}
		}
		shared := sharedPlugins(spec.Plugins, root.Spec.Plugins, plugins)
		if shared == "" {
			continue
		}
		warn := func(path, format string, args ...any) {
			out = append(out, fmt.Sprintf("%s: %s of root policy %s/%s for %s; the webhook caps it for the pods both select",
				path, fmt.Sprintf(format, args...), root.Namespace, root.Name, shared))
		}
		if len(b.FailureModes) > 0 {
			if spec.FailureMode != nil && !slices.Contains(b.FailureModes, *spec.FailureMode) {
				warn("spec.failureMode", "%s is outside failureModes %v", *spec.FailureMode, b.FailureModes)
			}
			if spec.FailureModeExpression != nil && len(b.FailureModes) == 1 {
				warn("spec.failureModeExpression", "results other than %s are outside failureModes %v", b.FailureModes[0], b.FailureModes)
			}
		}
		if b.ReadinessGate != nil && *b.ReadinessGate == v1alpha1.ReadinessGateRequired && spec.ReadinessGate != nil && !*spec.ReadinessGate {
			warn("spec.readinessGate", "false is against readinessGate Required")
		}
		r := spec.Retry
		if r == nil {
			continue
		}
		eff := defaultDecision(Plugin{}).Retry
		if r.Window != nil {
			eff.Window = r.Window.Duration
		}
		if r.Interval != nil {
			eff.Interval = r.Interval.Duration
		}
		if r.ExhaustedAction != nil {
			eff.ExhaustedAction = *r.ExhaustedAction
		}
		if b.MaxWindow != nil {
			if eff.Window > b.MaxWindow.Duration {
				warn("spec.retry.window", "%s is above maxWindow %s", eff.Window, b.MaxWindow.Duration)
			}
			if r.WindowExpression != nil {
				warn("spec.retry.windowExpression", "results above %s are above maxWindow %s", b.MaxWindow.Duration, b.MaxWindow.Duration)
			}
		}
		if b.MinInterval != nil && eff.Interval < b.MinInterval.Duration {
			warn("spec.retry.interval", "%s is below minInterval %s", eff.Interval, b.MinInterval.Duration)
		}
		if len(b.ExhaustedActions) > 0 && !slices.Contains(b.ExhaustedActions, eff.ExhaustedAction) {
			warn("spec.retry.exhaustedAction", "%s is outside exhaustedActions %v", eff.ExhaustedAction, b.ExhaustedActions)
		}
	}
	return out
}

// sharedPlugins names the plugins both spec.plugins lists select, comma-separated, or "" when
// they share none: "every plugin" when both list "*"; an entry that both list, or one lists
// and the other reaches through "*"; a registered plugin one lists by name and the other by
// alias.
func sharedPlugins(tenant, root []string, plugins []Plugin) string {
	tAll, rAll := slices.Contains(tenant, v1alpha1.AllPlugins), slices.Contains(root, v1alpha1.AllPlugins)
	if tAll && rAll {
		return "every plugin"
	}
	var names []string
	add := func(n string) {
		if n != v1alpha1.AllPlugins && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, e := range tenant {
		if rAll || slices.Contains(root, e) {
			add(e)
		}
	}
	for _, e := range root {
		if tAll {
			add(e)
		}
	}
	for _, p := range plugins {
		if pluginsSelect(tenant, p) && pluginsSelect(root, p) && (!tAll || !rAll) {
			add(p.Name)
		}
	}
	return strings.Join(names, ", ")
}

// isAudit reports whether p is in Audit mode (spec.enforcement: Audit).
func isAudit(p *v1alpha1.NetworkPluginPolicy) bool {
	return p.Spec.Enforcement != nil && *p.Spec.Enforcement == v1alpha1.EnforcementAudit
}
