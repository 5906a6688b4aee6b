package takeover

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestUnknownKeepsReadyNetwork reproduces the brownout that used to take networks away: a
// Ready `Fixed` NodePort game server of a GameServerSet, the manager suddenly unable to read
// GameServerSets (its ClusterRole loses them: every read is Forbidden, as during an
// authorization or API brownout), and a plain label patch on the pod. The label patch is
// admitted, the network-status keeps its bytes, no retry state is written (no window, no
// exhausted action), the Service is untouched, and the pod is marked network-unverified.
// Once the manager can read again, the network controller's next check clears the mark.
func TestUnknownKeepsReadyNetwork(t *testing.T) {
	ctx := context.Background()
	m := startManager(t)
	ns := "okg-unknown"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createGameServerSet(t, ns, "fx", []string{"PortProtocols", "80", "Fixed", "true"}, "game")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fx-0", Namespace: ns,
			Labels: map[string]string{networkstatus.LabelOwnerGSS: "fx", kubernetes.SelectorPodNameLabel: "fx-0"},
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: kubernetes.NodePortName,
				networkstatus.AnnotationNetworkConf: `[{"name":"PortProtocols","value":"80"},{"name":"Fixed","value":"true"}]`}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "game", Image: "game-server:1.0"}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var readyStatus, serviceVersion string
	eventually(t, time.Minute, "Fixed NodePort network Ready, Service owned by the GameServerSet", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "fx-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st, _ := networkstatus.StatusFromPod(p)
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "fx-0", metav1.GetOptions{})
		if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			return false, nil
		}
		readyStatus, serviceVersion = p.Annotations[networkstatus.AnnotationNetworkStatus], svc.ResourceVersion
		return len(svc.OwnerReferences) == 1 && svc.OwnerReferences[0].Kind == "GameServerSet", nil
	})

	// The manager loses GameServerSets.
	var role *rbacv1.ClusterRole
	for _, r := range m.Deployment.ClusterRoles {
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "gameserversets") {
				role = r
			}
		}
	}
	if role == nil {
		t.Fatal("no ClusterRole of config/rbac grants gameserversets")
	}
	restore := func() {
		stored, err := cs.RbacV1().ClusterRoles().Get(context.Background(), role.Name, metav1.GetOptions{})
		if err == nil {
			stored.Rules = role.Rules
			_, err = cs.RbacV1().ClusterRoles().Update(context.Background(), stored, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restore ClusterRole %s: %v", role.Name, err)
		}
	}
	t.Cleanup(restore)
	stored, err := cs.RbacV1().ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored.Rules = slices.DeleteFunc(slices.Clone(stored.Rules), func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "gameserversets") })
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, stored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	canRead := func(ctx context.Context) (bool, error) {
		review, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: m.ServiceAccount, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + m.Namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Group: "game.kruise.io", Resource: "gameserversets", Namespace: ns},
		}}, metav1.CreateOptions{})
		return err == nil && review.Status.Allowed, err
	}
	eventually(t, 30*time.Second, "the manager can no longer read GameServerSets", func(ctx context.Context) (bool, error) {
		ok, err := canRead(ctx)
		return !ok && err == nil, nil
	})

	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "fx-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"game.kruise.io/opsState":"Maintaining"}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatalf("label patch while the manager cannot read GameServerSets: %v, want it admitted", err)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "fx-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[networkstatus.AnnotationNetworkStatus]; got != readyStatus {
		t.Errorf("network-status after an Unknown failure:\n got  %s\n want %s (kept)", got, readyStatus)
	}
	if v, ok := p.Annotations[networkretry.Annotation]; ok {
		t.Errorf("retry state written after an Unknown failure: %s", v)
	}
	if _, ok := p.Annotations[networkretry.UnverifiedAnnotation]; !ok {
		t.Errorf("no %s mark after an Unknown failure: %v", networkretry.UnverifiedAnnotation, p.Annotations)
	}
	if svc, err := cs.CoreV1().Services(ns).Get(ctx, "fx-0", metav1.GetOptions{}); err != nil || svc.ResourceVersion != serviceVersion {
		t.Errorf("Service after the Unknown failure: %v (resourceVersion %s, want %s)", err, svc.ResourceVersion, serviceVersion)
	}

	restore()
	eventually(t, time.Minute, "the next check clears the mark, the network still Ready", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "fx-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, marked := p.Annotations[networkretry.UnverifiedAnnotation]
		st, _ := networkstatus.StatusFromPod(p)
		return !marked && st != nil && st.CurrentNetworkState == networkstatus.NetworkReady, nil
	})
}
