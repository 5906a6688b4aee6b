package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
	"github.com/okg-extensions/network-plugin-policy/pkg/version"
)

// TestAuditRollout: the rollout of a policy change as docs/policy.md describes it, against
// the manager as deployed (two replicas, its own RBAC). A NodePort pod without PortProtocols
// fails with a parameterError, which the built-in default admits NotReady. A namespace
// policy that would deny it, applied with enforcement: Audit, changes no decision (every pod
// is admitted, decided by the built-in default), while the replicas count its differing
// would-be decisions (at the CREATEs and at the network controller's retry UPDATEs) in npp_policy_audit_decisions_total and write them, with samples, into
// its status.audit. Switched to Enforce, the next CREATE is denied by it, and status.audit
// is removed.
func TestAuditRollout(t *testing.T) {
	ns := newNamespace(t, "audit", nil)
	policy := func(enforcement string) string {
		return fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: fail-fast, namespace: %s}
spec:
  enforcement: %s
  plugins: ["Kubernetes-NodePort"]
  failureMode: Synchronous
`, ns, enforcement)
	}
	applyPolicy(t, policy("Audit"))
	policyClient := versioned.NewForConfigOrDie(cp.Config)
	differs := func(ctx context.Context) (float64, error) {
		return mgr.Metric(ctx, "npp_policy_audit_decisions_total", fmt.Sprintf("namespace=%q", ns), `name="fail-fast"`, `outcome="differs"`)
	}
	eventually(t, 30*time.Second, "the Audit policy's differing decisions counted by the replicas", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, probePod(ns, "Kubernetes-NodePort"), metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("create under an Audit policy: %w (an Audit policy must change no decision)", err)
		}
		if got := p.Annotations[annotationDecision]; got != "Asynchronous by built-in default" {
			return false, fmt.Errorf("pod %s decided %q, want the built-in default's Asynchronous", p.Name, got)
		}
		n, err := differs(ctx)
		return err == nil && n >= 1, err
	})
	// The replicas write their counts and samples into status.audit, under their own RBAC.
	eventually(t, time.Minute, "status.audit with the differing decisions and a sample", func(ctx context.Context) (bool, error) {
		p, err := policyClient.PolicyV1alpha1().NetworkPluginPolicies(ns).Get(ctx, "fail-fast", metav1.GetOptions{})
		if err != nil || p.Status.Audit == nil {
			return false, err
		}
		var differing int64
		var samples []string
		for _, r := range p.Status.Audit.Replicas {
			differing += r.Differing
			for _, s := range r.Samples {
				samples = append(samples, s.Pod+" "+s.Operation+": "+s.Decision+" / would: "+s.WouldDecide)
			}
		}
		if differing < 1 || len(samples) == 0 {
			return false, nil
		}
		// The CREATEs would be denied; the network controller's retry UPDATEs, which leave the
		// network alone, would be admitted NotReady all the same.
		for _, s := range samples {
			create := strings.Contains(s, " CREATE: admitted NotReady (Asynchronous") && strings.Contains(s, "would: denied (Synchronous)")
			update := strings.Contains(s, " UPDATE: admitted NotReady (Asynchronous") &&
				strings.Contains(s, "would: admitted NotReady (Synchronous, but this update leaves the network alone")
			if !strings.HasPrefix(s, ns+"/probe-") || !create && !update {
				return false, fmt.Errorf("status.audit sample %q, want a probe pod's CREATE that would be denied or retry UPDATE that would be admitted", s)
			}
		}
		return true, nil
	})
	out, err := exec.Command(buildNppctl(t), "status", "-n", ns, "--kubeconfig", cp.KubeconfigPath, "--root-namespace", rootNS, "-o", "json").Output()
	if err != nil {
		t.Fatalf("nppctl status: %v\n%s", err, out)
	}
	var st struct {
		Audit []struct {
			Policy    string
			Differing int64
		}
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("nppctl status -o json: %v\n%s", err, out)
	}
	if len(st.Audit) != 1 || st.Audit[0].Policy != ns+"/fail-fast@1" || st.Audit[0].Differing < 1 {
		t.Errorf("nppctl status audit = %+v, want %s/fail-fast@1 with its differing decisions", st.Audit, ns)
	}

	applyPolicy(t, policy("Enforce"))
	eventually(t, 30*time.Second, "the next CREATE denied by the enforced policy", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, probePod(ns, "Kubernetes-NodePort"), metav1.CreateOptions{})
		if err == nil {
			return false, nil // the policy's new generation has not reached the store yet
		}
		if !strings.Contains(err.Error(), "denied by policy "+ns+"/fail-fast@2 (Synchronous)") {
			return false, fmt.Errorf("create: %w, want a denial by %s/fail-fast@2", err, ns)
		}
		return true, nil
	})
	eventually(t, 30*time.Second, "status.audit removed once Enforce", func(ctx context.Context) (bool, error) {
		p, err := policyClient.PolicyV1alpha1().NetworkPluginPolicies(ns).Get(ctx, "fail-fast", metav1.GetOptions{})
		return err == nil && p.Status.Audit == nil && p.Status.ObservedGeneration == 2, err
	})
}

// TestVersionLive: the leader records its version, revision and CEL environment on its
// leader-election Lease, with the RBAC config/ ships, and `nppctl version --live` reads
// them and finds no skew with an nppctl built from the same checkout.
func TestVersionLive(t *testing.T) {
	cel := policycel.CompatibilityVersion.String()
	eventually(t, time.Minute, "the leader's version on its Lease", func(ctx context.Context) (bool, error) {
		lease, err := cs.CoordinationV1().Leases(rootNS).Get(ctx, "network-plugin-policy.policy.game.kruise.io", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		info, ok := version.FromAnnotations(lease.Annotations)
		return ok && info.Version != "" && info.CELEnvironment == cel, nil
	})
	out, err := exec.Command(buildNppctl(t), "version", "--live", "--kubeconfig", cp.KubeconfigPath, "--manager-namespace", rootNS, "-o", "json").Output()
	if err != nil {
		t.Fatalf("nppctl version --live: %v\n%s", err, out)
	}
	var r struct {
		Client, Manager *version.Info
		Warnings        []string
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("nppctl version --live -o json: %v\n%s", err, out)
	}
	if r.Manager == nil || r.Manager.CELEnvironment != cel || r.Client == nil || r.Client.CELEnvironment != cel {
		t.Errorf("nppctl version --live = %s, want the client's and the manager's CEL environment %s", out, cel)
	}
	if r.Manager != nil && r.Client != nil && r.Manager.Revision != "" && r.Manager.Revision != r.Client.Revision {
		t.Errorf("manager revision %s, nppctl %s: both are built from this checkout", r.Manager.Revision, r.Client.Revision)
	}
}
