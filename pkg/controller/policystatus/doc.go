// Package policystatus writes the status of NetworkPluginPolicy objects: observedGeneration,
// the Ready condition (Accepted, InvalidExpression or InvalidSpec) and warnings, from the
// compile results of the policy Store, so Flux's kstatus and Argo CD health checks can read
// policy health.
package policystatus
