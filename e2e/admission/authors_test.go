package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
)

// TestPolicyAuthorsThroughAggregatedRoles: config/rbac's npp-admin, npp-edit and npp-view
// ClusterRoles aggregate into the built-in admin, edit and view roles, so a namespace owner
// bound to one of them in a namespace manages (or reads) that namespace's policies and no
// other's. kube-controller-manager's clusterrole-aggregation controller fills the built-in
// roles; the apiserver answers the SubjectAccessReviews, and one policy is really created and
// refused as the impersonated owner.
func TestPolicyAuthorsThroughAggregatedRoles(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "authors", nil)
	other := newNamespace(t, "authors-other", nil)
	for user, role := range map[string]string{"owner@example.com": "admin", "dev@example.com": "edit", "auditor@example.com": "view"} {
		_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role + "-" + strings.Split(user, "@")[0]},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	can := func(ctx context.Context, user, verb, resource, namespace string) (bool, error) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb,
				Group: v1alpha1.GroupVersion.Group, Resource: resource},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	type check struct {
		user, verb, resource, namespace string
		want                            bool
	}
	var checks []check
	for _, user := range []string{"owner@example.com", "dev@example.com"} {
		for _, verb := range []string{"create", "update", "patch", "delete", "get", "list", "watch"} {
			checks = append(checks, check{user, verb, "networkpluginpolicies", ns, true}, check{user, verb, "networkpluginpolicies", other, false})
		}
		checks = append(checks, check{user, "get", "networkpluginpolicies/status", ns, true},
			check{user, "update", "networkpluginpolicies/status", ns, false})
	}
	for _, verb := range []string{"get", "list", "watch"} {
		checks = append(checks, check{"auditor@example.com", verb, "networkpluginpolicies", ns, true})
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		checks = append(checks, check{"auditor@example.com", verb, "networkpluginpolicies", ns, false})
	}
	checks = append(checks, check{"auditor@example.com", "get", "networkpluginpolicies/status", ns, true},
		check{"auditor@example.com", "list", "networkpluginpolicies", other, false})

	// The aggregation controller fills the built-in roles asynchronously.
	eventually(t, 30*time.Second, "every answer as config/rbac's aggregated roles say", func(ctx context.Context) (bool, error) {
		for _, c := range checks {
			got, err := can(ctx, c.user, c.verb, c.resource, c.namespace)
			if err != nil {
				return false, err
			}
			if got != c.want {
				return false, fmt.Errorf("%s %s %s in %s: allowed=%t, want %t", c.user, c.verb, c.resource, c.namespace, got, c.want)
			}
		}
		return true, nil
	})

	asDev := rest.CopyConfig(cp.Config)
	asDev.Impersonate = rest.ImpersonationConfig{UserName: "dev@example.com"}
	npp := versioned.NewForConfigOrDie(asDev).PolicyV1alpha1().NetworkPluginPolicies
	mode := v1alpha1.FailureModeAsynchronous
	policy := func(namespace string) *v1alpha1.NetworkPluginPolicy {
		return &v1alpha1.NetworkPluginPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dev-policy", Namespace: namespace},
			Spec: v1alpha1.NetworkPluginPolicySpec{Plugins: []string{"Kubernetes-NodePort"}, FailureMode: &mode}}
	}
	if _, err := npp(ns).Create(ctx, policy(ns), metav1.CreateOptions{}); err != nil {
		t.Errorf("edit-bound user creates a policy in its namespace: %v", err)
	}
	if _, err := npp(other).Create(ctx, policy(other), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("edit-bound user creates a policy in another namespace: %v, want forbidden", err)
	}
}
