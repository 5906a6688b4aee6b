package network

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// named gives the builder's pod another namespace, name and UID.
func (b *podBuilder) named(ns, name string) *podBuilder {
	b.pod.Namespace, b.pod.Name, b.pod.UID = ns, name, types.UID("uid-"+ns+"-"+name)
	return b
}

func (b *podBuilder) decided() *podBuilder {
	return b.annotation(podwebhook.AnnotationDecision, "mode=Asynchronous; decidedBy=policy game/lb-async@1")
}

func TestClassify(t *testing.T) {
	now := at(10 * time.Minute)
	scheduled := at(2 * time.Minute)
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		want      PodState
		wantSince time.Time
		catchUp   bool
		skipped   bool
	}{
		{name: "ready", pod: newPod().decided().ready().obj(), want: StateReady},
		{name: "ready after retries", pod: newPod().decided().ready().retry(newState()).obj(), want: StateReady},
		{name: "waiting", pod: newPod().decided().network(networkstatus.NetworkWaiting).obj(), want: StateWaiting},
		{name: "not ready without retry", pod: newPod().decided().notReady().scheduledAt(scheduled).obj(), want: StateNotReady, wantSince: scheduled},
		{name: "retrying", pod: newPod().decided().notReady().retry(newState()).obj(), want: StateRetrying, wantSince: t0},
		{name: "retrying before any status", pod: newPod().decided().retry(newState()).obj(), want: StateRetrying, wantSince: t0},
		{name: "exhausted", pod: newPod().decided().notReady().retry(newState(exhaustedAt(at(5 * time.Minute)))).obj(), want: StateExhausted, wantSince: t0},
		{name: "exhausted for an earlier incarnation is retrying", pod: newPod().decided().notReady().retry(newState(exhaustedFor(at(5*time.Minute), "other"))).obj(), want: StateRetrying, wantSince: t0},
		{name: "pending", pod: newPod().decided().pending().obj(), want: StatePending},
		{name: "not decided: catch-up backlog", pod: newPod().obj(), want: StatePending, catchUp: true},
		{name: "forged retry state is no retry", pod: newPod().decided().notReady().annotation("policy.game.kruise.io/network-retry", "{not json").obj(), want: StateNotReady, wantSince: t0},
		{name: "forged status is no status", pod: newPod().decided().annotation(networkstatus.AnnotationNetworkStatus, "Ready").obj(), want: StatePending},
		{name: "since before creation is creation", pod: newPod().decided().notReady().retry(newState(func(s *networkretry.State) { s.Since.Time = t0.Add(-time.Hour) })).obj(), want: StateRetrying, wantSince: t0},
		{name: "terminating", pod: newPod().decided().ready().terminating().obj(), skipped: true},
		{name: "unregistered type", pod: newPod().decided().annotation(networkstatus.AnnotationNetworkType, "AlibabaCloud-SLB").obj(), skipped: true},
		{name: "network disabled", pod: newPod().decided().ready().label(networkstatus.LabelNetworkDisabled, "true").obj(), skipped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Classify(tc.pod, map[string]bool{testPlugin: true}, now)
			if ok == tc.skipped {
				t.Fatalf("Classify counted = %v, want %v", ok, !tc.skipped)
			}
			if tc.skipped {
				return
			}
			if got.State != tc.want || !got.NotReadySince.Equal(tc.wantSince) || got.CatchUp != tc.catchUp || got.Plugin != testPlugin {
				t.Errorf("Classify = %+v, want state %s, since %v, catchUp %v", got, tc.want, tc.wantSince, tc.catchUp)
			}
		})
	}
}

// TestStateCollector reads pods of every state from a cache-like reader with the network
// type index and checks every exported series, the top-N namespace cut, and that a pod
// without a network type is never listed.
func TestStateCollector(t *testing.T) {
	now := at(10 * time.Minute)
	const hostPort = "Kubernetes-HostPort"
	var pods []client.Object
	add := func(n int, ns, prefix string, b func() *podBuilder) {
		for i := range n {
			pods = append(pods, b().named(ns, fmt.Sprintf("%s-%d", prefix, i)).obj())
		}
	}
	add(3, "game", "ready", func() *podBuilder { return newPod().decided().ready() })
	add(2, "game", "retry", func() *podBuilder { return newPod().decided().notReady().retry(newState()) })
	add(1, "tiny", "retry", func() *podBuilder {
		return newPod().decided().notReady().retry(newState(func(s *networkretry.State) { s.Since.Time = at(time.Minute) }))
	})
	add(4, "big", "exhausted", func() *podBuilder {
		return newPod().decided().notReady().retry(newState(func(s *networkretry.State) { s.Since.Time = at(time.Minute) }))
	})
	for i, p := range pods[6:] {
		// Exhausted for its own UID.
		st := newState(exhaustedFor(at(5*time.Minute), p.GetUID()))
		pods[6+i] = newPod().decided().notReady().retry(st).named(p.GetNamespace(), p.GetName()).obj()
	}
	add(1, "game", "catchup", newPod)
	add(2, "hp", "pending", func() *podBuilder {
		return newPod().decided().pending().annotation(networkstatus.AnnotationNetworkType, hostPort)
	})
	plain := newPod().named("game", "plain").withoutAnnotation(networkstatus.AnnotationNetworkType).obj()
	pods = append(pods, plain)

	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(pods...).
		WithIndex(&corev1.Pod{}, NetworkTypeIndex, IndexNetworkType).Build()
	col := NewStateCollector(c, StateCollectorOptions{
		NetworkTypes:  []string{hostPort, testPlugin},
		TopNamespaces: 1,
		Clock:         clocktesting.NewFakePassiveClock(now),
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)

	var want []string
	counts := map[string]map[PodState]int{
		hostPort:   {StatePending: 2},
		testPlugin: {StateReady: 3, StateRetrying: 3, StateExhausted: 4, StatePending: 1},
	}
	for _, plugin := range []string{hostPort, testPlugin} {
		for _, st := range PodStates {
			want = append(want, fmt.Sprintf("npp_network_pods{plugin=%q,state=%q} %d", plugin, st, counts[plugin][st]))
		}
	}
	want = append(want,
		fmt.Sprintf("npp_network_not_ready_oldest_seconds{plugin=%q} 0", hostPort),
		fmt.Sprintf("npp_network_not_ready_oldest_seconds{plugin=%q} 600", testPlugin),
		fmt.Sprintf("npp_network_catch_up_backlog{plugin=%q} 0", hostPort),
		fmt.Sprintf("npp_network_catch_up_backlog{plugin=%q} 1", testPlugin),
		fmt.Sprintf("npp_network_not_ready_pods_by_namespace{namespace=\"big\",plugin=%q} 4", testPlugin),
	)
	slices.Sort(want)
	if got := exposition(t, reg); !slices.Equal(got, want) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	s, err := col.Summarize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.TopNamespaces(5); strings.Join(got, ",") != "big,game,tiny" {
		t.Errorf("TopNamespaces(5) = %v, want big,game,tiny (most not-Ready first, ties by name)", got)
	}
}

// exposition gathers reg and returns its series as sorted `name{label="value",...} value`
// lines, labels in name order, values as %g.
func exposition(t *testing.T, reg prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out = append(out, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

// TestInitializeCreatesZeroSeries: every counter series of a registered plugin exists at zero
// before the first event, so that Prometheus sees the first increase (an alert on
// increase(npp_network_retry_windows_exhausted_total[10m]) fires on the first exhausted
// window after a start).
func TestInitializeCreatesZeroSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Initialize([]string{testPlugin})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = true
		}
	}
	for _, want := range []string{
		"npp_network_retries_total{plugin=" + testPlugin + "}",
		"npp_network_retries_from_cache_total{plugin=" + testPlugin + "}",
		"npp_network_rechecks_total{plugin=" + testPlugin + "}",
		"npp_network_retry_windows_exhausted_total{action=Event,plugin=" + testPlugin + "}",
		"npp_network_retry_windows_exhausted_total{action=Recreate,plugin=" + testPlugin + "}",
		"npp_network_recreates_total{result=evicted}",
		"npp_network_ready_duration_seconds{plugin=" + testPlugin + "}",
		"npp_network_retry_lateness_seconds{plugin=" + testPlugin + "}",
	} {
		if !got[want] {
			t.Errorf("no series %s after Initialize; have %v", want, got)
		}
	}
}
