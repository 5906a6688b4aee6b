// Package gitops holds the tests of what the project ships for Argo CD and Flux
// (config/argocd, config/flux, config/samples/gitops): the NetworkPluginPolicy health check
// run by a Lua interpreter as Argo CD runs it, and the layouts that keep nppctl Test files
// out of what the GitOps tools apply. It has no non-test code.
package gitops
