package network

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
)

// HasNetworkType is the predicate that admits only pods carrying the annotation
// game.kruise.io/network-type (any value, even empty: the webhook reports unknown types); on
// updates it looks at the new object. Other pods never reach Reconcile.
func HasNetworkType() predicate.Predicate {
	return predicate.NewPredicateFuncs(hasNetworkType)
}

// hasNetworkType reports whether obj has the game.kruise.io/network-type annotation.
func hasNetworkType(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[networkstatus.AnnotationNetworkType]
	return ok
}
