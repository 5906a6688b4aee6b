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

// checkIngressClass returns a ParameterError naming IngressClassName when the pod's
// network-conf names a class that is neither in guard.AllowedIngressClasses (or "*") nor
// the cluster's default class: an IngressClass of that name that carries
// AnnotationDefaultIngressClass "true", read from c's cache. A network-conf without
// IngressClassName passes (its Ingress gets the default class from the API server). A
// failed read is an APICallError marked Unknown (nothing was seen).
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
		return plugin.WrapUnknown(err, "list IngressClasses")
	}
	var defaults []string
	for _, ic := range list.Items {
		if ic.Annotations[AnnotationDefaultIngressClass] == "true" {
			if ic.Name == name {
				return nil
			}
			defaults = append(defaults, ic.Name)
		}
	}
	allowed := slices.Concat(defaults, guard.AllowedIngressClasses)
	if len(allowed) == 0 {
		return plugin.ParamErrorf(ParamIngressClassName, "class %q is not allowed: the cluster has no default IngressClass and kubernetes.ingress.allowed_ingress_classes lists none; expected no IngressClassName or a class the platform lists there", name)
	}
	return plugin.ParamErrorf(ParamIngressClassName, "class %q is not allowed, expected one of [%s] (the cluster's default class and kubernetes.ingress.allowed_ingress_classes) or no IngressClassName", name, strings.Join(allowed, ", "))
}
