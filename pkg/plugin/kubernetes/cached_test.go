package kubernetes

import (
	"fmt"
	"slices"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// TestCachedObjectsCoverEveryCachedRead: the kinds the three plugins read through the cached
// client are warmed before the manager turns ready (plugin.CachedReader), each once: Nodes,
// Services, Ingresses and ResourceQuotas. GameServerSets are read uncached (unstructured) and
// are not listed.
func TestCachedObjectsCoverEveryCachedRead(t *testing.T) {
	reg, err := plugin.NewRegistry(Plugins(plugin.DefaultConfig())...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, obj := range reg.CachedObjects() {
		got = append(got, fmt.Sprintf("%T", obj))
	}
	slices.Sort(got)
	want := []string{"*v1.Ingress", "*v1.IngressClass", "*v1.Node", "*v1.ResourceQuota", "*v1.Service"}
	if !slices.Equal(got, want) {
		t.Errorf("CachedObjects = %v, want %v", got, want)
	}
}
