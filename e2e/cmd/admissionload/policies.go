package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	policyclient "github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
)

// Shape of the loaded policies (see policySet).
const (
	// rootPolicies and loadPolicies are the policies in the root namespace and in the load
	// namespace; the rest are spread over otherNamespaces namespaces game-00, game-01, ...
	rootPolicies    = 10
	loadPolicies    = 10
	otherNamespaces = 98
	// policyWorkers is how many policy creates are in flight while loading them.
	policyWorkers = 8
)

// policyPlugins are the plugin entries the policies cycle through.
var policyPlugins = [][]string{
	{"Kubernetes-NodePort"}, {"Kubernetes-HostPort"}, {"Kubernetes-Ingress"},
	{"Kubernetes-NodePort", "Kubernetes-Ingress"}, {policyv1alpha1.AllPlugins},
}

// otherNamespace returns the name of the i-th namespace of neither root nor load policies.
func otherNamespace(i int) string { return fmt.Sprintf("game-%02d", i) }

// policySet returns n policies, a mix of what platform teams and game teams write, and the
// namespaces they need besides root and load (labelled tier prod, dev or staging in turn).
// Policies are taken in this order until there are n:
//
//   - rootPolicies in root (cluster-wide): "*" with a timeout, a readiness gate and a retry
//     schedule (config/samples' cluster-default); one per Kubernetes plugin with a timeout;
//     an Asynchronous HostPort with Recreate, a patient NodePort, a "*" with a CEL
//     failureModeExpression and a NodePort timeout, each restricted by a namespaceSelector on
//     tier (which the load namespace lacks); and two with CEL matchConditions that are false
//     for the measured pods (an Ingress one on the namespace's tier, a "*" one for canaries);
//   - loadPolicies in load: one selects the measured pods (podSelector owner-gss gss-load,
//     HostPort and NodePort, a CEL matchCondition that is true for them, a timeout and the
//     retry schedule retry); the others select other GameServerSets
//     (gss-0, gss-1, ...), every other one with a CEL failureModeExpression;
//   - the rest spread round robin over otherNamespaces namespaces, per GameServerSet
//     (podSelector), plugins cycling through policyPlugins, every other one with a
//     matchCondition, every fourth with a failureModeExpression, every seventh with a
//     priority.
//
// Asynchronous policies that select Kubernetes-HostPort recreate on exhaustion (see
// recreateIfHostPort), so no create draws a warning. No policy makes a measured pod's
// admission fail or differ in kind: the plugins the measured pods use do not fail at CREATE,
// so failure modes do not come into play; the root policy "*" adds the readiness gate to the
// HostPort and NodePort pods, as cluster-default does in config/samples.
func policySet(root, load string, n int, retry policyv1alpha1.RetryPolicy) ([]*corev1.Namespace, []*policyv1alpha1.NetworkPluginPolicy) {
	var out []*policyv1alpha1.NetworkPluginPolicy
	add := func(ns, name string, spec policyv1alpha1.NetworkPluginPolicySpec) {
		if len(out) < n {
			out = append(out, &policyv1alpha1.NetworkPluginPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})
		}
	}
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	tier := func(t string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"tier": t}}
	}
	owner := func(gss string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{labelOwner: gss}}
	}
	notCanary := policyv1alpha1.MatchCondition{Name: "not-canary", Expression: "!('canary' in object.metadata.labels)"}
	byError := ptr.To("error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'")
	async := ptr.To(policyv1alpha1.FailureModeAsynchronous)

	// Root namespace: cluster-wide.
	add(root, "cluster-default", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{policyv1alpha1.AllPlugins}, Timeout: dur(8 * time.Second), ReadinessGate: ptr.To(true),
		Retry: &policyv1alpha1.RetryPolicy{Window: dur(2 * time.Minute), Interval: dur(5 * time.Second), MaxInterval: dur(30 * time.Second),
			ExhaustedAction: ptr.To(policyv1alpha1.ExhaustedActionEvent)},
	})
	for i, p := range []string{"Kubernetes-HostPort", "Kubernetes-NodePort", "Kubernetes-Ingress"} {
		add(root, fmt.Sprintf("timeout-%d", i), policyv1alpha1.NetworkPluginPolicySpec{Plugins: []string{p}, Timeout: dur(5 * time.Second)})
	}
	add(root, "prod-hostport-recreate", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{"Kubernetes-HostPort"}, NamespaceSelector: tier("prod"), FailureMode: async,
		Retry: &policyv1alpha1.RetryPolicy{Window: dur(10 * time.Minute), Interval: dur(10 * time.Second), MaxInterval: dur(time.Minute),
			ExhaustedAction: ptr.To(policyv1alpha1.ExhaustedActionRecreate)},
	})
	add(root, "dev-nodeport-patient", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{"Kubernetes-NodePort"}, NamespaceSelector: tier("dev"), FailureMode: async,
		Retry: &policyv1alpha1.RetryPolicy{Window: dur(15 * time.Minute)},
	})
	add(root, "staging-by-error", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{policyv1alpha1.AllPlugins}, NamespaceSelector: tier("staging"), FailureModeExpression: byError,
		MatchConditions: []policyv1alpha1.MatchCondition{{Name: "create-only", Expression: "request.operation == 'CREATE'"}},
	})
	add(root, "prod-ingress-cel", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{"Kubernetes-Ingress"}, Priority: ptr.To[int32](5), FailureMode: async,
		MatchConditions: []policyv1alpha1.MatchCondition{{Name: "prod", Expression: "'tier' in namespaceObject.metadata.labels && namespaceObject.metadata.labels['tier'] == 'prod'"}},
	})
	add(root, "canary-async", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{policyv1alpha1.AllPlugins}, Priority: ptr.To[int32](10), FailureMode: async,
		MatchConditions: []policyv1alpha1.MatchCondition{{Name: "canary", Expression: "'canary' in object.metadata.labels"}},
	})
	add(root, "not-delete", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{"Kubernetes-NodePort"}, NamespaceSelector: tier("prod"), Timeout: dur(3 * time.Second),
		MatchConditions: []policyv1alpha1.MatchCondition{{Name: "not-delete", Expression: "request.operation != 'DELETE'"}},
	})

	// Load namespace: one policy for the measured pods, the others for other workloads.
	add(load, "load-pods", policyv1alpha1.NetworkPluginPolicySpec{
		Plugins: []string{"Kubernetes-HostPort", "Kubernetes-NodePort"}, PodSelector: owner(ownerLoad),
		MatchConditions: []policyv1alpha1.MatchCondition{notCanary}, Timeout: dur(3 * time.Second),
		Retry: retry.DeepCopy(),
	})
	for i := range loadPolicies - 1 {
		spec := policyv1alpha1.NetworkPluginPolicySpec{
			Plugins: policyPlugins[i%len(policyPlugins)], PodSelector: owner(fmt.Sprintf("gss-%d", i)),
			MatchConditions: []policyv1alpha1.MatchCondition{notCanary}, FailureMode: async, Timeout: dur(3 * time.Second),
		}
		if i%2 == 1 {
			spec.FailureModeExpression = byError
		}
		add(load, fmt.Sprintf("gss-%d", i), spec)
	}

	// The rest: per GameServerSet in other namespaces.
	for j := 0; len(out) < n; j++ {
		spec := policyv1alpha1.NetworkPluginPolicySpec{
			Plugins:     policyPlugins[(j/otherNamespaces)%len(policyPlugins)],
			PodSelector: owner(fmt.Sprintf("gss-%d", j/otherNamespaces)),
			FailureMode: async, Timeout: dur(3 * time.Second),
			Retry: &policyv1alpha1.RetryPolicy{Window: dur(5 * time.Minute)},
		}
		if j%2 == 0 {
			spec.MatchConditions = []policyv1alpha1.MatchCondition{notCanary}
		}
		if j%4 == 1 {
			spec.FailureModeExpression = byError
		}
		if j%7 == 3 {
			spec.Priority = ptr.To[int32](int32(j % 3))
		}
		add(otherNamespace(j%otherNamespaces), fmt.Sprintf("gss-%d", j/otherNamespaces), spec)
	}

	used := map[string]bool{}
	for _, p := range out {
		used[p.Namespace] = true
		recreateIfHostPort(&p.Spec)
	}
	var namespaces []*corev1.Namespace
	for i := range otherNamespaces {
		if name := otherNamespace(i); used[name] {
			t := []string{"prod", "dev", "staging"}[i%3]
			namespaces = append(namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": t}}})
		}
	}
	return namespaces, out
}

// recreateIfHostPort sets retry.exhaustedAction Recreate on an Asynchronous spec that selects
// Kubernetes-HostPort (by name or "*"), as the validating webhook's warning asks: the mix has
// no policy a platform team would be warned about.
func recreateIfHostPort(spec *policyv1alpha1.NetworkPluginPolicySpec) {
	if spec.FailureMode == nil || *spec.FailureMode != policyv1alpha1.FailureModeAsynchronous {
		return
	}
	for _, p := range spec.Plugins {
		if p == hostPortType || p == policyv1alpha1.AllPlugins {
			if spec.Retry == nil {
				spec.Retry = &policyv1alpha1.RetryPolicy{}
			}
			spec.Retry.ExhaustedAction = ptr.To(policyv1alpha1.ExhaustedActionRecreate)
			return
		}
	}
}

// loadRetry returns the retry schedule of the policy that selects the measured pods: with
// retries, OKG's 5s first interval (the built-in default) doubling up to 1m within a 5m
// window; without, a first interval of 20m in a 30m window, longer than any run, so that
// the network controller never retries a measured pod while the phases run.
func loadRetry(retries bool) policyv1alpha1.RetryPolicy {
	if !retries {
		// The window must be longer than the interval (the CRD's rule).
		return policyv1alpha1.RetryPolicy{Window: &metav1.Duration{Duration: 30 * time.Minute},
			Interval: &metav1.Duration{Duration: 20 * time.Minute}, MaxInterval: &metav1.Duration{Duration: 20 * time.Minute}}
	}
	return policyv1alpha1.RetryPolicy{Window: &metav1.Duration{Duration: 5 * time.Minute},
		Interval: &metav1.Duration{Duration: 5 * time.Second}, MaxInterval: &metav1.Duration{Duration: time.Minute}}
}

// loadPolicySet creates the namespaces and the policies of policySet (policyWorkers at a
// time; each create goes through the manager's validating webhook) and waits, up to
// timeout, until every replica's policy store holds all of them as Accepted (its
// npp_policies{reason="Accepted"} gauge) and the status controller has written
// observedGeneration and Ready=True on every one, so the status writes are over before the
// measurement. It returns the namespaces the policies are in and how long the wait took.
func loadPolicySet(ctx context.Context, cs kubernetes.Interface, pcs policyclient.Interface, mgr *cluster.Manager,
	load string, n int, retry policyv1alpha1.RetryPolicy, timeout time.Duration) (int, time.Duration, error) {
	namespaces, policies := policySet(mgr.Namespace, load, n, retry)
	for _, ns := range namespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, 0, fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	used := map[string]bool{}
	work := make(chan *policyv1alpha1.NetworkPluginPolicy)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range policyWorkers {
		wg.Go(func() {
			for p := range work {
				_, err := pcs.PolicyV1alpha1().NetworkPluginPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("create NetworkPluginPolicy %s/%s: %w", p.Namespace, p.Name, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range policies {
		used[p.Namespace] = true
		work <- p
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}

	start := time.Now()
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(waitCtx, time.Second, true, func(ctx context.Context) (bool, error) {
		for _, r := range mgr.Replicas {
			got, err := r.Metric(ctx, "npp_policies", `reason="Accepted"`)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if int(got) != len(policies) {
				last = fmt.Sprintf("%s holds %d Accepted policies of %d", r.Name, int(got), len(policies))
				return false, nil
			}
		}
		list, err := pcs.PolicyV1alpha1().NetworkPluginPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.ObservedGeneration == p.Generation && meta.IsStatusConditionTrue(p.Status.Conditions, policyv1alpha1.ConditionReady) {
				ready++
			}
		}
		if ready != len(policies) {
			last = fmt.Sprintf("%d of %d policies have a current Ready=True status", ready, len(policies))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("wait for %d policies in both replicas' stores and Ready: %w (last: %s)", len(policies), err, last)
	}
	return len(used), time.Since(start), nil
}
