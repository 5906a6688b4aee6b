package plugin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

func TestNewRegistry(t *testing.T) {
	cases := map[string]struct {
		plugins []plugin.Plugin
		wantErr string
	}{
		"distinct names": {
			plugins: []plugin.Plugin{&fakePlugin{name: "A"}, &fakePlugin{name: "B"}},
		},
		"duplicate name rejected": {
			plugins: []plugin.Plugin{&fakePlugin{name: "A"}, &fakePlugin{name: "A"}},
			wantErr: `register plugin "A"`,
		},
		"empty name rejected": {
			plugins: []plugin.Plugin{&fakePlugin{}},
			wantErr: "empty name",
		},
		"nil plugin rejected": {
			plugins: []plugin.Plugin{nil},
			wantErr: "plugin is nil",
		},
		"names differing in case are distinct": {
			plugins: []plugin.Plugin{&fakePlugin{name: "Kubernetes-HostPort"}, &fakePlugin{name: "kubernetes-hostport"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := plugin.NewRegistry(tc.plugins...)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("NewRegistry: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("NewRegistry error = %v, want containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRegistryLookup(t *testing.T) {
	a := &fakePlugin{name: "Kubernetes-NodePort"}
	b := &fakePlugin{name: "AlibabaCloud-NLB", alias: "NLB-Network"}
	c := &fakePlugin{name: "Volcengine-CLB", alias: "NLB-Network"}
	r, err := plugin.NewRegistry(c, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"AlibabaCloud-NLB", "Kubernetes-NodePort", "Volcengine-CLB"}, r.Names()); diff != "" {
		t.Errorf("Names (-want,+got):\n%s", diff)
	}
	if p, err := r.Lookup("Kubernetes-NodePort"); err != nil || p != a {
		t.Errorf("Lookup exact = %v, %v", p, err)
	}
	for _, name := range []string{"kubernetes-nodeport", "NLB-Network", ""} {
		_, err := r.Lookup(name)
		var perr *plugin.Error
		if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param != networkstatus.AnnotationNetworkType {
			t.Errorf("Lookup(%q) error = %v, want parameterError naming %s", name, err, networkstatus.AnnotationNetworkType)
		}
	}
	if got := r.ByAlias("NLB-Network"); len(got) != 2 || got[0] != c || got[1] != b {
		t.Errorf("ByAlias = %v, want registration order [c b]", got)
	}
	if got := r.ByAlias("none"); len(got) != 0 {
		t.Errorf("ByAlias(none) = %v", got)
	}
	if got := r.List(); len(got) != 3 || got[0] != b || got[1] != a || got[2] != c {
		t.Errorf("List not sorted by name: %v", got)
	}
}

func TestRegistryInitAll(t *testing.T) {
	a := &fakePlugin{name: "A"}
	b := &fakePlugin{name: "B", initErr: errBoom}
	r, err := plugin.NewRegistry(b, a)
	if err != nil {
		t.Fatal(err)
	}
	err = r.InitAll(context.Background(), nil, plugin.DefaultConfig())
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), `init plugin "B"`) {
		t.Errorf("InitAll error = %v, want wrapping boom naming B", err)
	}
	if a.inits.Load() != 1 || b.inits.Load() != 1 {
		t.Errorf("inits = %d, %d; want 1, 1", a.inits.Load(), b.inits.Load())
	}
}

// informerPlugin is a fakePlugin that implements plugin.PodInformerUser.
type informerPlugin struct {
	*fakePlugin
	reg  *fakeRegistration
	err  error
	got  cache.Informer
	uses int
}

func (p *informerPlugin) UsePodInformer(_ context.Context, inf cache.Informer) (toolscache.ResourceEventHandlerRegistration, error) {
	p.uses++
	p.got = inf
	if p.err != nil {
		return nil, p.err
	}
	return p.reg, nil
}

type fakeRegistration struct{ synced bool }

func (r *fakeRegistration) HasSynced() bool                          { return r.synced }
func (r *fakeRegistration) HasSyncedChecker() toolscache.DoneChecker { return nil }

// fakeInformer stands for the manager's pod informer; the plugins only receive it.
type fakeInformer struct{ cache.Informer }

func TestRegistryUsePodInformer(t *testing.T) {
	inf := &fakeInformer{}
	a := &informerPlugin{fakePlugin: &fakePlugin{name: "A"}, reg: &fakeRegistration{}}
	b := &informerPlugin{fakePlugin: &fakePlugin{name: "B"}, reg: &fakeRegistration{}}
	plain := &fakePlugin{name: "C"}
	r, err := plugin.NewRegistry(b, plain, a)
	if err != nil {
		t.Fatal(err)
	}
	synced, err := r.UsePodInformer(context.Background(), inf)
	if err != nil {
		t.Fatal(err)
	}
	if a.uses != 1 || b.uses != 1 || a.got != inf || b.got != inf {
		t.Fatalf("uses = %d, %d; want each plugin given the informer once", a.uses, b.uses)
	}
	for _, step := range []struct {
		a, b, want bool
	}{{false, false, false}, {true, false, false}, {true, true, true}} {
		a.reg.synced, b.reg.synced = step.a, step.b
		if got := synced(); got != step.want {
			t.Errorf("synced() with A=%t B=%t = %t, want %t", step.a, step.b, got, step.want)
		}
	}

	none, err := plugin.NewRegistry(plain)
	if err != nil {
		t.Fatal(err)
	}
	if synced, err := none.UsePodInformer(context.Background(), inf); err != nil || !synced() {
		t.Errorf("no informer users: err=%v, want no error and synced at once", err)
	}

	bad := &informerPlugin{fakePlugin: &fakePlugin{name: "Bad"}, err: errors.New("refused")}
	r, err = plugin.NewRegistry(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.UsePodInformer(context.Background(), inf); err == nil || !strings.Contains(err.Error(), `plugin "Bad"`) || !errors.Is(err, bad.err) {
		t.Errorf("error = %v, want it wrapping refused and naming Bad", err)
	}
}

// resultPlugin is a fakePlugin that reads its controller's answer in annotations.
type resultPlugin struct {
	fakePlugin
	keys []string
}

func (p *resultPlugin) ResultAnnotations() []string                       { return p.keys }
func (p *resultPlugin) TrustsResultWriter(authenticationv1.UserInfo) bool { return false }

// TestRegistryResultAnnotations: the result annotations of the plugins that read any
// (plugin.ResultReader), by name; nil when none does.
func TestRegistryResultAnnotations(t *testing.T) {
	r, err := plugin.NewRegistry(&fakePlugin{name: "A"}, &resultPlugin{fakePlugin: fakePlugin{name: "B"}, keys: []string{"b/answer", "b/status"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"B": {"b/answer", "b/status"}}, r.ResultAnnotations()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	none, err := plugin.NewRegistry(&fakePlugin{name: "A"})
	if err != nil {
		t.Fatal(err)
	}
	if got := none.ResultAnnotations(); got != nil {
		t.Errorf("without result readers: %v, want nil", got)
	}
}
