// Package promtool pins Prometheus's promtool, which `make test-rules` builds into bin/ from
// the Go module proxy to run `promtool check rules` and `promtool test rules` on
// config/prometheus/. It is a module of its own so that Prometheus's dependencies never
// touch the manager's.
package promtool
