// Package apicompat checks, before the manager registers its webhooks, that the API server
// can honour what its webhook configuration relies on: the matchConditions that keep every
// pod without game.kruise.io/network-type away from the failurePolicy Fail entry. On an API
// server that drops them (older than MinServerVersion, or with the feature turned off) that
// entry would intercept every pod in the cluster, and a manager that is not running would
// refuse them all.
package apicompat
