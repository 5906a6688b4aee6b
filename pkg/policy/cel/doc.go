// Package cel compiles and evaluates the CEL expressions of NetworkPluginPolicy objects:
// spec.matchConditions[*].expression (bool), spec.failureModeExpression (string) and
// spec.retry.windowExpression (duration).
//
// The environment is the Kubernetes base environment of k8s.io/apiserver/pkg/cel/environment
// at the explicit compatibility version CompatibilityVersion, extended with the variables
// object, oldObject, namespaceObject, request, plugin and, in failure and retry expressions
// only, error. Programs carry the apiserver's per-call cost limit; evaluations of one admission
// request share one Budget and run under the request's context deadline.
package cel
