// Package integrations holds the tests of what the project ships for other tools: the
// NetworkPluginPolicy health check run by a Lua interpreter as Argo CD runs it
// (config/argocd), the layout that keeps nppctl Test files out of what Flux and Argo CD
// apply (config/samples/gitops), and the PrometheusRule that must carry the same groups as
// the plain rules file (config/prometheus). It has no non-test code.
package integrations
