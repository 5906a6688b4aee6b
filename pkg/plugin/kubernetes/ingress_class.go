package kubernetes

import (
	"context"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// AnnotationDefaultIngressClass is the annotation that makes an IngressClass the
// cluster's default, with the value "true" (networking.k8s.io, the same key the API
// server's DefaultIngressClass admission plugin reads).
const AnnotationDefaultIngressClass = networkingv1.AnnotationIsDefaultIngressClass

// checkIngressClass checks the pod's IngressClassName (none passes: its Ingress gets the
// cluster's default class from the API server).
//
// Without allowed_ingress_classes (guard.AllowedIngressClasses nil), OKG's behaviour: any
// class passes, and a class that no IngressClass in c's cache names returns a warning-level
// ParameterError (nothing would serve the Ingress until that class exists; GitOps may create
// it later). With the key set, the platform's opt-in restriction: a class passes when it is
// listed ("*": any) or is the cluster's default class (an IngressClass annotated
// AnnotationDefaultIngressClass "true"); any other is a ParameterError naming
// IngressClassName and the allowed classes. A failed read is an APICallError marked Unknown
// (nothing was seen) under the restriction, and a warning without it (the class passes
// anyway).
func checkIngressClass(ctx context.Context, c client.Reader, params ingressParams, guard plugin.IngressConfig) error {
	if params.ingressClassName == nil {
		return nil
	}
	name := *params.ingressClassName
	if slices.Contains(guard.AllowedIngressClasses, "*") || slices.Contains(guard.AllowedIngressClasses, name) {
		return nil
	}
	var list networkingv1.IngressClassList
	if err := c.List(ctx, &list); err != nil {
		if guard.AllowedIngressClasses == nil {
			// Without the restriction the class passes whatever the cluster holds: the
			// list only decides a warning.
			e := plugin.ParamErrorf(ParamIngressClassName, "could not check that class %q exists: %v", name, err)
			e.Warning = true
			return e
		}
		return plugin.WrapUnknown(err, "list IngressClasses")
	}
	return IngressClassAllowed(name, list.Items, guard)
}

// IngressClassAllowed is checkIngressClass's rule for the class name among the cluster's
// IngressClasses classes: nil when it passes; a warning-level ParameterError naming
// IngressClassName when allowed_ingress_classes is absent and no IngressClass has that name;
// a ParameterError naming IngressClassName and the allowed classes when the key restricts the
// classes and name is neither listed nor the default class. nppctl preflight applies it to a
// cluster's classes.
func IngressClassAllowed(name string, classes []networkingv1.IngressClass, guard plugin.IngressConfig) error {
	if slices.Contains(guard.AllowedIngressClasses, "*") || slices.Contains(guard.AllowedIngressClasses, name) {
		return nil
	}
	var defaults, all []string
	for _, ic := range classes {
		all = append(all, ic.Name)
		if ic.Annotations[AnnotationDefaultIngressClass] == "true" {
			if ic.Name == name {
				return nil
			}
			defaults = append(defaults, ic.Name)
		}
	}
	if guard.AllowedIngressClasses == nil {
		if slices.Contains(all, name) {
			return nil
		}
		e := plugin.ParamErrorf(ParamIngressClassName, "class %q does not exist in the cluster (IngressClasses: [%s]): the Ingress is written, and no ingress controller serves it until that class exists", name, strings.Join(all, ", "))
		e.Warning = true
		return e
	}
	allowed := slices.Concat(defaults, guard.AllowedIngressClasses)
	if len(allowed) == 0 {
		return plugin.NotAllowedf(ParamIngressClassName, "class %q is not allowed: the cluster has no default IngressClass and kubernetes.ingress.allowed_ingress_classes lists none; expected no IngressClassName or a class the platform lists there", name)
	}
	return plugin.NotAllowedf(ParamIngressClassName, "class %q is not allowed, expected one of [%s] (the cluster's default class and kubernetes.ingress.allowed_ingress_classes) or no IngressClassName", name, strings.Join(allowed, ", "))
}
