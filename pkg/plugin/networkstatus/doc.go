// Package networkstatus holds OKG's pod-level network contract (DESIGN.md section 2):
// the annotation and label keys, the NetworkStatus JSON written to
// game.kruise.io/network-status, the network-conf parameter list read from
// game.kruise.io/network-conf, and their codecs.
//
// Types and JSON tags follow OKG's apis/v1alpha1 (gameserver_types.go,
// gameserverset_types.go) so that pods and tools written for OKG read and write the
// same bytes. Decoding errors are *plugin.Error values of type parameterError that
// name the annotation.
package networkstatus
