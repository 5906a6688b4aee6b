package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// TestPolicySet checks the loaded mix: the requested number of policies with unique
// names, spread over the root namespace, the load namespace and others that exist;
// namespaceSelector only in the root namespace; no Asynchronous HostPort without Recreate;
// and, in the load namespace, exactly one
// policy whose podSelector selects the measured pods.
func TestPolicySet(t *testing.T) {
	for _, n := range []int{5, 15, 1000} {
		namespaces, policies := policySet("root", "load", n, loadRetry(true))
		if len(policies) != n {
			t.Fatalf("policySet(%d): %d policies", n, len(policies))
		}
		exists := map[string]bool{"root": true, "load": true}
		for _, ns := range namespaces {
			exists[ns.Name] = true
		}
		names := map[string]bool{}
		perNamespace := map[string]int{}
		selectingLoad := 0
		measured := labels.Set(podGenerator{namespace: "load"}.pod("p1", kindNodePort, 0).Labels)
		for _, p := range policies {
			key := p.Namespace + "/" + p.Name
			if names[key] {
				t.Errorf("policySet(%d): %s twice", n, key)
			}
			names[key] = true
			perNamespace[p.Namespace]++
			if !exists[p.Namespace] {
				t.Errorf("policySet(%d): %s is in a namespace it does not create", n, key)
			}
			if p.Spec.NamespaceSelector != nil && p.Namespace != "root" {
				t.Errorf("policySet(%d): %s has a namespaceSelector outside the root namespace", n, key)
			}
			if m := p.Spec.FailureMode; m != nil && *m == policyv1alpha1.FailureModeAsynchronous && selectsHostPort(p.Spec.Plugins) &&
				(p.Spec.Retry == nil || p.Spec.Retry.ExhaustedAction == nil || *p.Spec.Retry.ExhaustedAction != policyv1alpha1.ExhaustedActionRecreate) {
				t.Errorf("policySet(%d): %s is Asynchronous on HostPort without Recreate (a validation warning)", n, key)
			}
			if p.Namespace == "load" && p.Spec.PodSelector != nil {
				sel, err := metav1.LabelSelectorAsSelector(p.Spec.PodSelector)
				if err != nil {
					t.Fatal(err)
				}
				if sel.Matches(measured) {
					selectingLoad++
				}
			}
		}
		if n == 1000 {
			if perNamespace["root"] != rootPolicies || perNamespace["load"] != loadPolicies || len(perNamespace) != 2+otherNamespaces {
				t.Errorf("policySet(1000): %d root, %d load policies in %d namespaces; want %d, %d in %d",
					perNamespace["root"], perNamespace["load"], len(perNamespace), rootPolicies, loadPolicies, 2+otherNamespaces)
			}
			if selectingLoad != 1 {
				t.Errorf("policySet(1000): %d load-namespace policies select the measured pods, want 1", selectingLoad)
			}
		}
	}
}

// selectsHostPort reports whether a spec.plugins list selects Kubernetes-HostPort.
func selectsHostPort(plugins []string) bool {
	for _, p := range plugins {
		if p == hostPortType || p == policyv1alpha1.AllPlugins {
			return true
		}
	}
	return false
}
