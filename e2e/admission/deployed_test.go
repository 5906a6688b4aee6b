package admission

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// TestManagerServiceAccountCanDoWhatTheCodeDoes asks the apiserver, as `kubectl auth can-i`
// does (a SelfSubjectAccessReview) and with the manager's own token (the replicas'
// kubeconfig), about every verb the code uses, and a few it must not have: config/rbac is
// what the replicas of every other scenario run with, and this test names the permission
// when a marker is missing.
func TestManagerServiceAccountCanDoWhatTheCodeDoes(t *testing.T) {
	type check struct {
		verb, resource, namespace string // namespace "" = all namespaces (-A)
		name                      string // "" = any object
		want                      bool
	}
	var checks []check
	allow := func(resource, namespace string, verbs ...string) {
		for _, v := range verbs {
			checks = append(checks, check{v, resource, namespace, "", true})
		}
	}
	deny := func(resource, namespace string, verbs ...string) {
		for _, v := range verbs {
			checks = append(checks, check{v, resource, namespace, "", false})
		}
	}
	named := func(want bool, resource, name string, verbs ...string) {
		for _, v := range verbs {
			checks = append(checks, check{v, resource, "", name, want})
		}
	}

	// The pod informer (HostPort state, the network controller), trigger stamps.
	allow("pods", "", "get", "list", "watch", "patch")
	// Recreate is an eviction, so PodDisruptionBudgets decide.
	allow("pods/eviction", "", "create")
	// The readiness-gate condition.
	allow("pods/status", "", "patch")
	// Owner references with blockOwnerDeletion on per-pod Services and Ingresses.
	allow("pods/finalizers", "", "update")
	// Services and Ingresses are written by controllerutil.CreateOrPatch: create and patch,
	// never update.
	allow("services", "", "get", "list", "watch", "create", "patch")
	allow("ingresses.networking.k8s.io", "", "get", "list", "watch", "create", "patch")
	deny("services", "", "update")
	deny("ingresses.networking.k8s.io", "", "update")
	allow("ingressclasses.networking.k8s.io", "", "get", "list", "watch")
	allow("nodes", "", "get", "list", "watch")
	// NodePort lists a namespace's quotas from the cache before it creates a Service.
	allow("resourcequotas", "", "get", "list", "watch")
	allow("namespaces", "", "get", "list", "watch")
	allow("gameserversets.game.kruise.io", "", "get", "list", "watch")
	// AlibabaCloud-AutoNLBs-V2: the operators' NLB and EIP objects are created, read and
	// deleted with their GameServerSet, never changed, and their status is the operators'.
	allow("nlbs.nlboperator.alibabacloud.com", "", "get", "list", "watch", "create", "delete")
	allow("eips.eip.alibabacloud.com", "", "get", "list", "watch", "create", "delete")
	deny("nlbs.nlboperator.alibabacloud.com", "", "update", "patch")
	deny("eips.eip.alibabacloud.com", "", "update", "patch")
	deny("nlbs.nlboperator.alibabacloud.com/status", "", "update", "patch")
	deny("eips.eip.alibabacloud.com/status", "", "update", "patch")
	// AmazonWebServices-NLB: per port a TargetGroup, Listener and TargetGroupBinding, made,
	// read, brought back to the network-conf (patch) and deleted; their status is the
	// controllers'.
	for _, r := range []string{"targetgroups.elbv2.services.k8s.aws", "listeners.elbv2.services.k8s.aws", "targetgroupbindings.elbv2.k8s.aws"} {
		allow(r, "", "get", "list", "watch", "create", "patch", "delete")
		deny(r, "", "update")
		deny(r+"/status", "", "update", "patch")
	}
	// Fixed objects are owned by the pod's GameServerSet with blockOwnerDeletion, which
	// OwnerReferencesPermissionEnforcement allows only to who may update its finalizers.
	allow("gameserversets.game.kruise.io/finalizers", "", "update")
	// eventrecorder.StableNameSink: create, then get and update the series of an Event that
	// another replica or an earlier series stored.
	allow("events.events.k8s.io", "", "create", "get", "update", "patch")
	allow("events", "", "create", "patch")
	allow("networkpluginpolicies.policy.game.kruise.io", "", "get", "list", "watch")
	// The policy status controller and the audit recorder update the status subresource
	// (with the resourceVersion); nothing reads or patches it.
	allow("networkpluginpolicies.policy.game.kruise.io/status", "", "update")
	deny("networkpluginpolicies.policy.game.kruise.io/status", "", "get", "patch")
	// Webhook configurations: read all (the informers; the OKG guard reads OKG's), write
	// only its own two (the caBundle; the sync/async matchConditions) and OKG's validating one.
	allow("mutatingwebhookconfigurations.admissionregistration.k8s.io", "", "get", "list", "watch")
	allow("validatingwebhookconfigurations.admissionregistration.k8s.io", "", "get", "list", "watch")
	mutating, validating := "network-plugin-policy-mutating-webhook-configuration", "network-plugin-policy-validating-webhook-configuration"
	named(true, "mutatingwebhookconfigurations.admissionregistration.k8s.io", mutating, "update", "patch")
	named(true, "validatingwebhookconfigurations.admissionregistration.k8s.io", validating, "update")
	// The GameServerSet entry's matchConditions follow the guard (pkg/controller/okgvalidation).
	named(true, "validatingwebhookconfigurations.admissionregistration.k8s.io", validating, "patch")
	deny("mutatingwebhookconfigurations.admissionregistration.k8s.io", "", "update", "patch", "delete", "create")
	deny("validatingwebhookconfigurations.admissionregistration.k8s.io", "", "update", "patch", "delete", "create")
	named(false, "mutatingwebhookconfigurations.admissionregistration.k8s.io", "kruise-game-mutating-webhook", "update", "patch")
	// The one object of another product it writes: its matchCondition on OKG's GameServerSet
	// entry, by JSON patch (pkg/controller/okgvalidation); never an update of the whole.
	named(true, "validatingwebhookconfigurations.admissionregistration.k8s.io", "kruise-game-validating-webhook", "patch")
	named(false, "validatingwebhookconfigurations.admissionregistration.k8s.io", "kruise-game-validating-webhook", "update", "delete")
	named(false, "mutatingwebhookconfigurations.admissionregistration.k8s.io", mutating, "delete")
	// The secured metrics endpoint reviews scrapers' tokens.
	allow("tokenreviews.authentication.k8s.io", "", "create")
	allow("subjectaccessreviews.authorization.k8s.io", "", "create")
	// Its own namespace only: the certificate Secret and the leader-election Lease.
	// The certificate rotator reads the Secret through the cache (list, watch) and writes
	// only its own; leader election creates its Lease and then gets and updates only it.
	allow("secrets", rootNS, "get", "list", "watch")
	namedIn := func(want bool, resource, namespace, name string, verbs ...string) {
		for _, v := range verbs {
			checks = append(checks, check{v, resource, namespace, name, want})
		}
	}
	namedIn(true, "secrets", rootNS, "network-plugin-policy-webhook-cert", "update")
	deny("secrets", rootNS, "update", "create", "delete")
	allow("leases.coordination.k8s.io", rootNS, "create")
	namedIn(true, "leases.coordination.k8s.io", rootNS, "network-plugin-policy.policy.game.kruise.io", "get", "update")
	deny("leases.coordination.k8s.io", rootNS, "update", "delete")
	namedIn(false, "leases.coordination.k8s.io", rootNS, "another-controller", "get", "update")
	// The load-balancer plugins' port ledger: its fixed ConfigMaps, created by the manifests,
	// read and written by name; no other ConfigMap of its namespace, and no create or list
	// (the number of ledger objects does not grow with the ids pods name).
	for _, name := range lb.LedgerConfigMapNames(lb.DefaultLedgerName) {
		namedIn(true, "configmaps", rootNS, name, "get", "update")
	}
	deny("configmaps", rootNS, "create", "list", "watch", "update", "delete")
	namedIn(false, "configmaps", rootNS, "some-other-config", "get", "update")
	// Least privilege: nothing it does not need.
	deny("secrets", "", "get", "list")
	deny("secrets", "default", "get")
	// The OKG guard gets kruise-game-manager's ConfigMap by name (resourceNames), no other.
	deny("configmaps", "", "get", "list", "watch")
	deny("leases.coordination.k8s.io", "default", "update")
	// Nothing is deleted outright: per-pod objects go by garbage collection, pods by eviction.
	// Services and Ingresses are the exception on paper only: the API server's
	// OwnerReferencesPermissionEnforcement admission requires delete of a patch that changes
	// ownerReferences (TestRefusedWriteKeepsReadyNetwork repairs one); the code never deletes.
	deny("pods", "", "create", "update", "delete")
	allow("services", "", "delete")
	allow("ingresses.networking.k8s.io", "", "delete")
	deny("ingressclasses.networking.k8s.io", "", "create", "update", "patch", "delete")
	deny("networkpluginpolicies.policy.game.kruise.io", "", "create", "update", "delete")
	deny("clusterroles.rbac.authorization.k8s.io", "", "create")

	cfg, err := clientcmd.BuildConfigFromFlags("", mgr.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 100
	asManager := kubernetes.NewForConfigOrDie(cfg)
	for _, c := range checks {
		resource, sub, _ := strings.Cut(c.resource, "/")
		name, group, _ := strings.Cut(resource, ".")
		review, err := asManager.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: group, Resource: name, Subresource: sub, Namespace: c.namespace, Name: c.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview as %s: %v", mgr.ServiceAccount, err)
		}
		scope := "-A"
		if c.namespace != "" {
			scope = "-n " + c.namespace
		}
		object := c.resource
		if c.name != "" {
			object += "/" + c.name
		}
		if review.Status.Allowed != c.want {
			t.Errorf("kubectl auth can-i %s %s %s as %s: %v, want %v", c.verb, object, scope, mgr.ServiceAccount, review.Status.Allowed, c.want)
		}
	}
}

// TestMetricsNeedTheReaderRole scrapes every replica's secured /metrics endpoint
// (--metrics-secure): a token bound to config/rbac's metrics-reader gets the metrics, a token
// of a ServiceAccount without it gets 403, and no token gets 401.
func TestMetricsNeedTheReaderRole(t *testing.T) {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "no-metrics", Namespace: rootNS}}
	if _, err := cs.CoreV1().ServiceAccounts(rootNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.ServiceAccountConfig(ctx, rootNS, sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range mgr.Replicas {
		body, err := r.Scrape(ctx, "")
		if err != nil {
			t.Errorf("%s: scrape with the metrics-reader token: %v", r.Name, err)
		} else if !strings.Contains(body, "controller_runtime_webhook_requests_total") {
			t.Errorf("%s: /metrics holds no manager metrics:\n%.500s", r.Name, body)
		}
		if _, err := r.Scrape(ctx, cfg.BearerToken); err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s: scrape with a token without metrics-reader: %v, want 403 Forbidden", r.Name, err)
		}
		// controller-runtime's filter answers 500 when the TokenReview rejects the token.
		if _, err := r.Scrape(ctx, "not-a-token"); err == nil {
			t.Errorf("%s: scrape with an invalid token succeeded, want it refused", r.Name)
		}
	}
}
