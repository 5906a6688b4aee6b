package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Deployment is the repository's config/default as `kubectl kustomize` renders it: what a
// platform team installs with `kubectl apply -k config/default`. The e2e suites run the
// manager from it (its ServiceAccount and RBAC, its container's flags and environment, its
// replica count and webhook configurations), so that a permission missing from config/rbac or
// a flag that does not work fails a scenario.
type Deployment struct {
	// Namespace is the manager's namespace (the Namespace object of config/default).
	Namespace *corev1.Namespace
	// ServiceAccount is the manager's ServiceAccount.
	ServiceAccount *corev1.ServiceAccount
	// ClusterRoles, ClusterRoleBindings, Roles and RoleBindings are config/rbac with the
	// namespace and name prefix of config/default.
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding
	// Secrets are the Secrets the manifests create (the empty webhook certificate Secret).
	Secrets []*corev1.Secret
	// ConfigMaps are the ConfigMaps the manifests create (the empty port ledger).
	ConfigMaps []*corev1.ConfigMap
	// Manager is the manager's Deployment.
	Manager *appsv1.Deployment
	// Mutating and Validating are the webhook configurations, clientConfig still pointing at
	// the webhook Service.
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
}

// Container returns the manager container of the Deployment.
func (d *Deployment) Container() corev1.Container { return d.Manager.Spec.Template.Spec.Containers[0] }

// RenderDeployment runs `kubectl kustomize config/default` in the repository and decodes the
// objects the e2e suites install; other kinds (the CRD, Services, the PodDisruptionBudget) are
// skipped. An error names the object that could not be decoded, or a kind that is missing.
func RenderDeployment(ctx context.Context) (*Deployment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	out, err := kustomize(ctx, filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, err
	}
	d := &Deployment{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode config/default: %w", err)
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		var target any
		switch doc["kind"] {
		case "Namespace":
			d.Namespace = &corev1.Namespace{}
			target = d.Namespace
		case "ServiceAccount":
			d.ServiceAccount = &corev1.ServiceAccount{}
			target = d.ServiceAccount
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			d.ClusterRoles, target = append(d.ClusterRoles, r), r
		case "ClusterRoleBinding":
			r := &rbacv1.ClusterRoleBinding{}
			d.ClusterRoleBindings, target = append(d.ClusterRoleBindings, r), r
		case "Role":
			r := &rbacv1.Role{}
			d.Roles, target = append(d.Roles, r), r
		case "RoleBinding":
			r := &rbacv1.RoleBinding{}
			d.RoleBindings, target = append(d.RoleBindings, r), r
		case "Secret":
			s := &corev1.Secret{}
			d.Secrets, target = append(d.Secrets, s), s
		case "ConfigMap":
			c := &corev1.ConfigMap{}
			d.ConfigMaps, target = append(d.ConfigMaps, c), c
		case "Deployment":
			d.Manager = &appsv1.Deployment{}
			target = d.Manager
		case "MutatingWebhookConfiguration":
			d.Mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			target = d.Mutating
		case "ValidatingWebhookConfiguration":
			d.Validating = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			target = d.Validating
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(raw, target); err != nil {
			return nil, fmt.Errorf("decode %s %v of config/default: %w", doc["kind"], doc["metadata"], err)
		}
	}
	switch {
	case d.Namespace == nil, d.ServiceAccount == nil, d.Manager == nil, d.Mutating == nil, d.Validating == nil:
		return nil, fmt.Errorf("config/default lacks a Namespace, ServiceAccount, Deployment or webhook configuration")
	case len(d.Manager.Spec.Template.Spec.Containers) != 1:
		return nil, fmt.Errorf("the manager Deployment has %d containers, want 1", len(d.Manager.Spec.Template.Spec.Containers))
	}
	return d, nil
}

// kustomize renders the kustomization in dir with `kubectl kustomize`.
func kustomize(ctx context.Context, dir string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "kubectl", "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, stderr.String())
	}
	return out, nil
}
