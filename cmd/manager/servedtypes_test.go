package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
)

// everyProvider is a provider configuration that enables every provider table and every
// optional sub-table this manager reads, so that providerPlugins returns every plugin it has.
const everyProvider = `[kubernetes]
enable = true
[alibabacloud]
enable = true
[alibabacloud.slb]
min_port = 500
max_port = 600
[alibabacloud.nlb]
min_port = 500
max_port = 600
[hwcloud]
enable = true
[hwcloud.elb]
min_port = 500
max_port = 600
[hwcloud.cce.elb]
min_port = 500
max_port = 600
[volcengine]
enable = true
[volcengine.clb]
min_port = 500
max_port = 600
[jdcloud]
enable = true
[jdcloud.nlb]
min_port = 500
max_port = 600
[tencentcloud]
enable = true
[aws]
enable = true
[aws.nlb]
min_port = 30001
max_port = 30050
`

// servedTypesTable is the Markdown table of docs/migration-from-okg.md between the
// served-types markers, from OKG's types (plugin.OKGNetworkTypes) and the plugins this
// manager has.
func servedTypesTable(served []string) string {
	code := func(names []string) string {
		q := make([]string, len(names))
		for i, n := range names {
			q[i] = "`" + n + "`"
		}
		return strings.Join(q, ", ")
	}
	var b strings.Builder
	b.WriteString("| OKG's provider table | OKG's network types | served by this manager | hand the provider over |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	for _, p := range plugin.OKGNetworkTypes {
		var mine, others []string
		for _, t := range p.Types {
			if slices.Contains(served, t) {
				mine = append(mine, t)
			} else {
				others = append(others, t)
			}
		}
		servedCell, handover := code(mine), ""
		switch {
		case len(others) == 0:
			servedCell, handover = "all", "yes"
		case len(mine) == 0:
			servedCell, handover = "none", "no: keep it with OKG"
		default:
			handover = fmt.Sprintf("only while the cluster has no pod or GameServerSet of %s (the guard refuses the handover otherwise)", code(others))
		}
		fmt.Fprintf(&b, "| `[%s]` | %s | %s | %s |\n", p.Provider, code(p.Types), servedCell, handover)
	}
	return b.String()
}

// TestServedTypesTableIsTheRegistry: the table of docs/migration-from-okg.md that answers
// "which of my OKG network types does this manager serve, and can my provider be handed
// over" is what the plugins of every provider say, and no plugin serves a type OKG does not
// have.
func TestServedTypesTableIsTheRegistry(t *testing.T) {
	cfg, err := plugin.ParseConfig([]byte(everyProvider))
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, p := range providerPlugins(cfg) {
		served = append(served, p.Name())
	}
	for _, name := range served {
		if !slices.ContainsFunc(plugin.OKGNetworkTypes, func(p plugin.ProviderTypes) bool { return slices.Contains(p.Types, name) }) {
			t.Errorf("plugin %s is no network type of OKG's (plugin.OKGNetworkTypes)", name)
		}
	}
	// The guard hands a provider over by the types' prefixes: every type of a provider this
	// manager serves any of must be that provider's to the guard too.
	for _, p := range plugin.OKGNetworkTypes {
		if !slices.ContainsFunc(p.Types, func(t string) bool { return slices.Contains(served, t) }) {
			continue
		}
		for _, typ := range p.Types {
			if got := okgguard.ProviderOf(typ); got != p.Provider {
				t.Errorf("okgguard.ProviderOf(%q) = %q, want %q", typ, got, p.Provider)
			}
		}
	}
	doc, err := os.ReadFile("../../docs/migration-from-okg.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- served-types: TestServedTypesTableIsTheRegistry -->\n", "<!-- /served-types -->"
	_, rest, ok := strings.Cut(string(doc), begin)
	got, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("docs/migration-from-okg.md has no %q ... %q block", begin, end)
	}
	if want := servedTypesTable(served); got != want {
		t.Errorf("docs/migration-from-okg.md's served-types table is\n%s\nwant\n%s", got, want)
	}
}

// TestPluginFinalizersAreCached: every plugin's finalizer is one the manager's pod cache
// keeps on a pod whatever its annotations (kubernetes.CachesPod), so that a terminating pod
// whose network type was removed is still seen, and its finalizer let go.
func TestPluginFinalizersAreCached(t *testing.T) {
	cfg, err := plugin.ParseConfig([]byte(everyProvider))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range providerPlugins(cfg) {
		f, ok := p.(plugin.PodFinalizer)
		if !ok {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Finalizers: []string{f.Finalizer()}}}
		if !kubernetes.CachesPod(pod) {
			t.Errorf("plugin %s's finalizer %s: a pod with it and no network type is not cached", p.Name(), f.Finalizer())
		}
	}
}
