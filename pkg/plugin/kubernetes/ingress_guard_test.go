package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestIngressGuardrails: the [kubernetes.ingress] provider config decides which
// Annotation keys and hosts a network-conf may use; a refused one is a ParameterError
// naming it, at CREATE (OnPodAdded) and at UPDATE, before anything is written.
func TestIngressGuardrails(t *testing.T) {
	base := func(extra ...networkstatus.ConfParam) []networkstatus.ConfParam {
		return append([]networkstatus.ConfParam{param("Path", "/game<id>"), param("PathType", "Prefix"), param("Port", "8080"),
			param("Host", "play<id>.games.example.com")}, extra...)
	}
	ann := func(kv string) networkstatus.ConfParam { return param("Annotation", kv) }
	allow := func(keys ...string) plugin.IngressConfig {
		return plugin.IngressConfig{AllowedAnnotations: append([]string{}, keys...)} // never nil: a set list
	}
	hosts := func(s ...string) plugin.IngressConfig { return plugin.IngressConfig{AllowedHostSuffixes: s} }
	cases := map[string]struct {
		guard     plugin.IngressConfig
		conf      []networkstatus.ConfParam
		wantParam string // "" = accepted
		wantMsg   string
	}{
		"default: OKG's rewrite-target passes": {
			conf: base(ann("nginx.ingress.kubernetes.io/rewrite-target: /$2"), ann("nginx.ingress.kubernetes.io/proxy-body-size: 1m")),
		},
		"default: server-snippet refused": {
			conf:      base(ann("nginx.ingress.kubernetes.io/server-snippet: location / { return 200; }")),
			wantParam: ParamAnnotation,
			wantMsg:   `Annotation "nginx.ingress.kubernetes.io/server-snippet" is not allowed by the Ingress provider config (keys ending in -snippet are refused by default)`,
		},
		"default: auth-url refused": {
			conf:      base(ann("nginx.ingress.kubernetes.io/auth-url: http://x/#;}}}")),
			wantParam: ParamAnnotation,
			wantMsg:   `Annotation "nginx.ingress.kubernetes.io/auth-url" is not allowed by the Ingress provider config (auth-url and auth-signin are refused by default)`,
		},
		"default: auth-signin refused": {
			conf:      base(ann("nginx.ingress.kubernetes.io/auth-signin: https://login")),
			wantParam: ParamAnnotation, wantMsg: `"nginx.ingress.kubernetes.io/auth-signin"`,
		},
		"default: auth-tls-match-cn refused": {
			conf:      base(ann("nginx.ingress.kubernetes.io/auth-tls-match-cn: CN=x")),
			wantParam: ParamAnnotation, wantMsg: `(auth-tls-* keys are refused by default)`,
		},
		"default: mirror-target refused": {
			conf:      base(ann("nginx.ingress.kubernetes.io/mirror-target: https://elsewhere")),
			wantParam: ParamAnnotation, wantMsg: `(mirror-* keys are refused by default)`,
		},
		"default: Mirror-Host in another controller's prefix and case refused": {
			conf:      base(ann("example.com/Mirror-Host: x")),
			wantParam: ParamAnnotation, wantMsg: `"example.com/Mirror-Host"`,
		},
		"default: auth-type (not a family) passes": {
			conf: base(ann("nginx.ingress.kubernetes.io/auth-type: basic")),
		},
		"allowlist: prefix does not admit mirror-*": {
			guard:     allow("nginx.ingress.kubernetes.io/*"),
			conf:      base(ann("nginx.ingress.kubernetes.io/mirror-uri: /m")),
			wantParam: ParamAnnotation, wantMsg: `(mirror-* keys are refused unless kubernetes.ingress.allowed_annotations lists the exact key)`,
		},
		"allowlist: auth-url listed exactly passes": {
			guard: allow("nginx.ingress.kubernetes.io/auth-url"),
			conf:  base(ann("nginx.ingress.kubernetes.io/auth-url: https://auth.internal/check")),
		},
		"default: configuration-snippet refused": {
			conf:      base(ann("nginx.ingress.kubernetes.io/configuration-snippet: more_set_headers x;")),
			wantParam: ParamAnnotation, wantMsg: `"nginx.ingress.kubernetes.io/configuration-snippet"`,
		},
		"default: another controller's snippet refused": {
			conf:      base(ann("haproxy.org/backend-config-snippet: x")),
			wantParam: ParamAnnotation, wantMsg: `"haproxy.org/backend-config-snippet"`,
		},
		"default: snippet in upper case refused": {
			conf:      base(ann("example.com/Auth-Snippet: x")),
			wantParam: ParamAnnotation, wantMsg: `"example.com/Auth-Snippet"`,
		},
		"default: any host": {
			conf: append(base()[:3:3], param("Host", "anything.example.net")),
		},
		"default: a rule without host (catch-all) refused": {
			conf:      base()[:3:3],
			wantParam: ParamHost,
			wantMsg:   "is required: an Ingress rule without host serves every host (a catch-all)",
		},
		"default: a wildcard host refused": {
			conf:      append(base()[:3:3], param("Host", "*.games.example.com")),
			wantParam: ParamHost,
			wantMsg:   `wildcard host "*.games.example.com" serves every name under it`,
		},
		"default: a wildcard TLS host refused": {
			conf:      append(base()[:3:3], param("Host", "play<id>.games.example.com"), param("TlsHosts", "*.games.example.com")),
			wantParam: ParamTLSHosts,
			wantMsg:   `wildcard host "*.games.example.com"`,
		},
		"default: server-alias refused": {
			conf:      base(ann("nginx.ingress.kubernetes.io/server-alias: victim.example.com")),
			wantParam: ParamAnnotation,
			wantMsg:   `(server-alias (it adds hosts that the host checks do not see) are refused by default)`,
		},
		"allow_catch_all_host: a wildcard host passes": {
			guard: plugin.IngressConfig{AllowCatchAllHost: true},
			conf:  append(base()[:3:3], param("Host", "*.games.example.com")),
		},
		"allow_catch_all_host: a rule without host passes": {
			guard: plugin.IngressConfig{AllowCatchAllHost: true},
			conf:  base()[:3:3],
		},
		"allowlist: exact key passes": {
			guard: allow("nginx.ingress.kubernetes.io/rewrite-target"),
			conf:  base(ann("nginx.ingress.kubernetes.io/rewrite-target: /$2")),
		},
		"allowlist: prefix passes": {
			guard: allow("nginx.ingress.kubernetes.io/*"),
			conf:  base(ann("nginx.ingress.kubernetes.io/proxy-body-size: 1m")),
		},
		"allowlist: unlisted key refused": {
			guard:     allow("nginx.ingress.kubernetes.io/rewrite-target"),
			conf:      base(ann("nginx.ingress.kubernetes.io/proxy-body-size: 1m")),
			wantParam: ParamAnnotation,
			wantMsg:   `Annotation "nginx.ingress.kubernetes.io/proxy-body-size" is not allowed by the Ingress provider config (kubernetes.ingress.allowed_annotations: ["nginx.ingress.kubernetes.io/rewrite-target"])`,
		},
		"allowlist: a prefix does not let a snippet through": {
			guard:     allow("nginx.ingress.kubernetes.io/*"),
			conf:      base(ann("nginx.ingress.kubernetes.io/server-snippet: x")),
			wantParam: ParamAnnotation, wantMsg: "unless kubernetes.ingress.allowed_annotations lists the exact key",
		},
		"allowlist: a snippet listed exactly passes": {
			guard: allow("nginx.ingress.kubernetes.io/server-snippet"),
			conf:  base(ann("nginx.ingress.kubernetes.io/server-snippet: x")),
		},
		"allowlist: empty refuses every Annotation": {
			guard:     allow(),
			conf:      base(ann("a.example/b: c")),
			wantParam: ParamAnnotation, wantMsg: `"a.example/b"`,
		},
		"allowlist: empty, no Annotation passes": {
			guard: allow(),
			conf:  base(),
		},
		"host suffix: name under the suffix passes": {
			guard: hosts("games.example.com"),
			conf:  base(),
		},
		"host suffix: leading dot and case": {
			guard: hosts(".Games.Example.com"),
			conf:  base(param("TlsHosts", "PLAY.games.example.com")),
		},
		"host suffix: the suffix itself passes": {
			guard: hosts("games.example.com"),
			conf:  append(base()[:3:3], param("Host", "games.example.com")),
		},
		"host suffix: other host refused": {
			guard:     hosts("games.example.com"),
			conf:      append(base()[:3:3], param("Host", "login.bank.example")),
			wantParam: ParamHost,
			wantMsg:   `Host "login.bank.example" is not allowed by the Ingress provider config (kubernetes.ingress.allowed_host_suffixes: ["games.example.com"])`,
		},
		"host suffix: not a label boundary refused": {
			guard:     hosts("example.com"),
			conf:      append(base()[:3:3], param("Host", "evilexample.com")),
			wantParam: ParamHost, wantMsg: `"evilexample.com"`,
		},
		"host suffix: no Host refused": {
			guard:     hosts("games.example.com"),
			conf:      base()[:3:3],
			wantParam: ParamHost, wantMsg: "is required by the Ingress provider config",
		},
		"host suffix: TlsHosts entry refused": {
			guard:     hosts("games.example.com"),
			conf:      base(param("TlsHosts", "play.games.example.com,www.bank.example")),
			wantParam: ParamTLSHosts, wantMsg: `TlsHosts "www.bank.example"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ig := NewIngress()
			cfg := plugin.DefaultConfig()
			cfg.Kubernetes.Ingress = tc.guard
			if err := ig.Init(ctx, nil, cfg); err != nil {
				t.Fatal(err)
			}
			_, err := ig.OnPodAdded(ctx, newClient(), newPod("gs-3", IngressName, tc.conf...).obj())
			c := newClient()
			pod, uerr := ig.OnPodUpdated(ctx, c, newPod("gs-3", IngressName, tc.conf...).uid("u3").node("n1").ip("10.0.0.3").obj())
			if tc.wantParam == "" {
				if isFatal(err) || isFatal(uerr) {
					t.Fatalf("refused: CREATE %v, UPDATE %v", err, uerr)
				}
				return
			}
			for op, e := range map[string]error{"CREATE": err, "UPDATE": uerr} {
				perr := plugin.AsError(e)
				if perr == nil || perr.Type != plugin.ParameterError || perr.Warning || perr.Param != tc.wantParam || !strings.Contains(perr.Message, tc.wantMsg) {
					t.Errorf("%s: error = %#v, want ParameterError %s with %q", op, perr, tc.wantParam, tc.wantMsg)
				}
			}
			if st := status(t, pod); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				t.Errorf("status = %+v, want NotReady", st)
			}
			for _, obj := range []client.Object{&networkingv1.Ingress{}, &corev1.Service{}} {
				if err := c.Get(ctx, client.ObjectKey{Namespace: "game", Name: "gs-3"}, obj); !apierrors.IsNotFound(err) {
					t.Errorf("%T written for a refused network-conf (get: %v)", obj, err)
				}
			}
		})
	}
}

// TestIngressGuardrailsFromProviderConfig: the [kubernetes.ingress] table of a provider
// config file reaches the registered Ingress plugin through Registry.InitAll, as the
// manager wires it (cmd/manager setupPlugins).
func TestIngressGuardrailsFromProviderConfig(t *testing.T) {
	ctx := context.Background()
	cfg, err := plugin.ParseConfig([]byte("[kubernetes.ingress]\nallowed_annotations = [\"nginx.ingress.kubernetes.io/rewrite-target\"]\nallowed_host_suffixes = [\"example.com\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := plugin.NewRegistry(Plugins(cfg)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.InitAll(ctx, newClient(), cfg); err != nil {
		t.Fatal(err)
	}
	ig, _ := reg.Get(IngressName)
	_, err = ig.OnPodAdded(ctx, nil, newPod("gs-3", IngressName, ingressConf()...).obj())
	wantError(t, err, "", "", false) // rewrite-target, hosts under example.com
	_, err = ig.OnPodAdded(ctx, nil, newPod("gs-3", IngressName, ingressConf(param("Annotation", "nginx.ingress.kubernetes.io/proxy-body-size: 1m"))...).obj())
	wantError(t, err, plugin.ParameterError, ParamAnnotation, false, `"nginx.ingress.kubernetes.io/proxy-body-size" is not allowed`)
}

// TestIngressHostOfAnotherNamespace: a Host or TlsHosts entry that an Ingress of another
// namespace already serves (rules or TLS, compared without case) is a parameterError naming
// the host and that namespace, and no Ingress is written; a host served in the pod's own
// namespace, or only by a rule without host, is not refused.
func TestIngressHostOfAnotherNamespace(t *testing.T) {
	victim := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bank", Name: "web"},
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{Host: "Victim.Example.com"}, {}},
			TLS:   []networkingv1.IngressTLS{{Hosts: []string{"secure.example.com"}}},
		},
	}
	own := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "lobby"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "lobby.example.com"}}}}
	cases := map[string]struct {
		extra     []networkstatus.ConfParam
		wantParam string
		wantMsg   string
	}{
		"rule host of another namespace": {
			extra:     []networkstatus.ConfParam{param("Host", "victim.example.com")},
			wantParam: ParamHost,
			wantMsg:   `host "victim.example.com" is already served by an Ingress of namespace "bank"`,
		},
		"TLS host of another namespace": {
			extra:     []networkstatus.ConfParam{param("Host", "play<id>.example.com"), param("TlsHosts", "play<id>.example.com,secure.example.com")},
			wantParam: ParamTLSHosts,
			wantMsg:   `host "secure.example.com" is already served by an Ingress of namespace "bank"`,
		},
		"host of the pod's own namespace": {
			extra: []networkstatus.ConfParam{param("Host", "lobby.example.com")},
		},
		"a free host": {
			extra: []networkstatus.ConfParam{param("Host", "play<id>.example.com")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newClient(victim.DeepCopy(), own.DeepCopy())
			conf := append([]networkstatus.ConfParam{param("Path", "/game<id>"), param("PathType", "Prefix"), param("Port", "8080")}, tc.extra...)
			pod := newPod("gs-0", IngressName, conf...).uid("u0").ip("10.0.0.9").obj()
			_, err := NewIngress().OnPodUpdated(context.Background(), c, pod)
			if tc.wantParam == "" {
				if err != nil && !plugin.AsError(err).Warning {
					t.Fatalf("OnPodUpdated: %v, want accepted", err)
				}
				return
			}
			wantError(t, err, plugin.ParameterError, tc.wantParam, false, tc.wantMsg)
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "game", Name: "gs-0"}, &networkingv1.Ingress{}); !apierrors.IsNotFound(err) {
				t.Errorf("an Ingress was written for a refused host: %v", err)
			}
		})
	}
}

// TestIngressGuardKeepsLiveNetwork: a guardrail that refuses the network-conf of a pod whose
// network is already Ready and whose own Ingress exists (added by an upgrade, here the
// catch-all refusal) does not take the network away: nothing is written, the network-status
// stays Ready and the refusal is a warning. A pod without a live network is refused.
func TestIngressGuardKeepsLiveNetwork(t *testing.T) {
	ctx := context.Background()
	c := newClient()
	conf := []networkstatus.ConfParam{param("Path", "/game<id>"), param("PathType", "Prefix"), param("Port", "8080")}
	before := &Ingress{guard: plugin.IngressConfig{AllowCatchAllHost: true}}
	live, err := before.OnPodUpdated(ctx, c, newPod("gs-0", IngressName, conf...).uid("u0").ip("10.0.0.9").obj())
	if err != nil && !plugin.AsError(err).Warning {
		t.Fatal(err)
	}
	if st := status(t, live); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Fatalf("setup: network-status %+v, want Ready", st)
	}
	ing := &networkingv1.Ingress{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "game", Name: "gs-0"}, ing); err != nil {
		t.Fatal(err)
	}

	after := NewIngress() // the default guard: a rule without host is refused
	got, err := after.OnPodUpdated(ctx, c, live.DeepCopy())
	wantError(t, err, plugin.ParameterError, ParamHost, true, "is required", "the pod's network is live")
	if st := status(t, got); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Errorf("network-status %+v after the refusal, want still Ready", st)
	}
	kept := &networkingv1.Ingress{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "game", Name: "gs-0"}, kept); err != nil || kept.ResourceVersion != ing.ResourceVersion {
		t.Errorf("the live Ingress was written: %v (resourceVersion %s, was %s)", err, kept.ResourceVersion, ing.ResourceVersion)
	}

	// Another pod of the same conf, without a live network: refused.
	_, err = after.OnPodUpdated(ctx, c, newPod("gs-1", IngressName, conf...).uid("u1").ip("10.0.0.10").obj())
	wantError(t, err, plugin.ParameterError, ParamHost, false, "is required")
}

// TestIngressClassAllowlist: without allowed_ingress_classes (OKG's behaviour) any class
// passes, and one no IngressClass names passes with a warning naming IngressClassName. With
// the key set (the platform's restriction), a class passes when it is the cluster's default
// class or listed ("*": any); anything else is a parameterError naming IngressClassName and
// the allowed classes, before any object is written. A network-conf without IngressClassName
// always passes. A live network whose class is no longer allowed is kept (a warning).
func TestIngressClassAllowlist(t *testing.T) {
	ctx := context.Background()
	internal := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "internal"}}
	conf := func(class string) []networkstatus.ConfParam {
		c := []networkstatus.ConfParam{param("Path", "/game<id>"), param("PathType", "Prefix"), param("Port", "8080"), param("Host", "play<id>.example.com")}
		if class != "" {
			c = append(c, param("IngressClassName", class))
		}
		return c
	}
	noDefault := func() client.Client {
		return fake.NewClientBuilder().WithObjects(internal.DeepCopy()).WithIndex(&networkingv1.Ingress{}, IngressHostIndex, IngressHosts).Build()
	}
	restricted := []string{}
	for name, tc := range map[string]struct {
		client  client.Client
		allowed []string
		class   string
		param   string // "" = passes
		warning bool   // passes with a warning naming param
		msg     []string
		unknown bool
	}{
		"no class, no default class in the cluster": {client: noDefault()},
		"OKG's default: any class that exists":      {client: noDefault(), class: "internal"},
		"OKG's default: a class that does not exist": {client: newClient(internal), class: "public", param: ParamIngressClassName, warning: true,
			msg: []string{`class "public" does not exist in the cluster (IngressClasses: [internal, nginx])`}},
		"restricted: the cluster's default class":     {client: newClient(internal), class: "nginx", allowed: restricted},
		"restricted: a class that is not the default": {client: newClient(internal), class: "internal", allowed: restricted, param: ParamIngressClassName, msg: []string{`class "internal" is not allowed`, "[nginx]"}},
		"restricted: a class that does not exist":     {client: newClient(), class: "public", allowed: []string{"internal"}, param: ParamIngressClassName, msg: []string{`class "public"`, "[nginx, internal]"}},
		"restricted: a listed class":                  {client: newClient(internal), class: "internal", allowed: []string{"internal"}},
		"restricted: any class":                       {client: noDefault(), class: "internal", allowed: []string{"*"}},
		"restricted: no default class, none listed":   {client: noDefault(), class: "internal", allowed: restricted, param: ParamIngressClassName, msg: []string{"the cluster has no default IngressClass"}},
		"restricted: the IngressClass list fails":     {client: failingClient("list", "IngressClassList"), class: "internal", allowed: restricted, unknown: true},
	} {
		t.Run(name, func(t *testing.T) {
			ig := &Ingress{guard: plugin.IngressConfig{AllowedIngressClasses: tc.allowed}}
			_, err := ig.OnPodUpdated(ctx, tc.client, newPod("gs-2", IngressName, conf(tc.class)...).uid("u2").ip("10.0.0.2").obj())
			written := tc.client.Get(ctx, client.ObjectKey{Namespace: "game", Name: "gs-2"}, &networkingv1.Ingress{}) == nil
			switch {
			case tc.unknown:
				if e := plugin.AsError(err); e == nil || e.Type != plugin.APICallError || !e.Unknown {
					t.Fatalf("error = %v, want an Unknown apiCallError", err)
				}
			case tc.param == "":
				wantError(t, err, "", "", false)
			case tc.warning:
				wantError(t, err, plugin.ParameterError, tc.param, true, tc.msg...)
				if !written {
					t.Error("no Ingress written for a class that only warns")
				}
			default:
				wantError(t, err, plugin.ParameterError, tc.param, false, tc.msg...)
				if written {
					t.Error("an Ingress was written for a refused class")
				}
			}
		})
	}

	t.Run("OKG's default: the IngressClass list fails", func(t *testing.T) {
		class := "internal"
		err := checkIngressClass(ctx, failingClient("list", "IngressClassList"), ingressParams{ingressClassName: &class}, plugin.IngressConfig{})
		wantError(t, err, plugin.ParameterError, ParamIngressClassName, true, `could not check that class "internal" exists`)
	})

	t.Run("a live network keeps its Ingress", func(t *testing.T) {
		c := newClient(internal)
		before := &Ingress{guard: plugin.IngressConfig{AllowedIngressClasses: []string{"internal"}}}
		live, err := before.OnPodUpdated(ctx, c, newPod("gs-3", IngressName, conf("internal")...).uid("u3").ip("10.0.0.3").obj())
		wantError(t, err, "", "", false)
		after := &Ingress{guard: plugin.IngressConfig{AllowedIngressClasses: []string{}}}
		got, err := after.OnPodUpdated(ctx, c, live.DeepCopy())
		wantError(t, err, plugin.ParameterError, ParamIngressClassName, true, `class "internal" is not allowed`, "the pod's network is live")
		if st := status(t, got); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			t.Errorf("network-status %+v after the refusal, want still Ready", st)
		}
	})
}

// TestIngressHostFirstClaimWins: a host belongs to the namespace whose Ingress has served it
// longest. Game servers whose (Fixed, GameServerSet-owned) Ingress serves a host keep it when
// a tenant creates an Ingress for the same host later, even one whose namespace sorts first;
// a pod whose namespace came second is refused, naming the older claim.
func TestIngressHostFirstClaimWins(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(t0.Add(time.Hour))
	gss := metav1.OwnerReference{APIVersion: "game.kruise.io/v1alpha1", Kind: "GameServerSet", Name: "arena", UID: "gss-uid", Controller: ptr.To(true)}
	ingress := func(ns, name string, created metav1.Time, owners ...metav1.OwnerReference) *networkingv1.Ingress {
		return &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: created, OwnerReferences: owners},
			Spec:       networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "play.example.com"}}},
		}
	}
	conf := []networkstatus.ConfParam{param("Path", "/game<id>"), param("PathType", "Prefix"), param("Port", "8080"), param("Host", "play.example.com")}
	cases := map[string]struct {
		objs    []client.Object
		wantMsg string // "" = accepted
	}{
		"the game servers' Fixed Ingress is older than the tenant's": {
			objs: []client.Object{ingress("game", "gs-fixed", t0, gss), ingress("aaa-tenant", "grab", later)},
		},
		"the tenant's Ingress is older": {
			objs:    []client.Object{ingress("game", "gs-fixed", later, gss), ingress("aaa-tenant", "grab", t0)},
			wantMsg: `host "play.example.com" is already served by an Ingress of namespace "aaa-tenant"; a host is served by one namespace only, the one that served it first (Ingress aaa-tenant/grab, created 2026-12-01T10:00:00Z)`,
		},
		"the same second: the namespace that sorts first": {
			objs:    []client.Object{ingress("game", "gs-fixed", t0, gss), ingress("aaa-tenant", "grab", t0)},
			wantMsg: `already served by an Ingress of namespace "aaa-tenant"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newClient(tc.objs...)
			pod := newPod("gs-0", IngressName, conf...).uid("u0").ip("10.0.0.9").label(networkstatus.LabelOwnerGSS, "arena").obj()
			_, err := NewIngress().OnPodUpdated(context.Background(), c, pod)
			if tc.wantMsg == "" {
				if err != nil && !plugin.AsError(err).Warning {
					t.Fatalf("OnPodUpdated: %v, want accepted (the older claim)", err)
				}
				return
			}
			wantError(t, err, plugin.ParameterError, ParamHost, false, tc.wantMsg)
		})
	}
}

// TestIngressGuardKeepsLiveFixedNetwork: a live network whose Ingress its GameServerSet owns
// (Fixed) is kept as a pod-owned one is, when a guardrail refuses its network-conf.
func TestIngressGuardKeepsLiveFixedNetwork(t *testing.T) {
	ctx := context.Background()
	fixed := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "gs-0", ResourceVersion: "7",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "game.kruise.io/v1alpha1", Kind: "GameServerSet", Name: "arena", UID: "gss-uid", Controller: ptr.To(true)}}}}
	c := newClient(fixed)
	pod := newPod("gs-0", IngressName, param("Path", "/game<id>"), param("PathType", "Prefix"), param("Port", "8080"), param("Fixed", "true")).
		uid("u0").ip("10.0.0.9").label(networkstatus.LabelOwnerGSS, "arena").obj()
	if err := networkstatus.SetStatus(pod, nil, networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkReady,
		DesiredNetworkState: networkstatus.NetworkReady, NetworkType: IngressName}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := NewIngress().OnPodUpdated(ctx, c, pod) // the default guard: a rule without host is refused
	wantError(t, err, plugin.ParameterError, ParamHost, true, "is required", "the pod's network is live")
	if st := status(t, got); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Errorf("network-status %+v after the refusal, want still Ready", st)
	}
}
