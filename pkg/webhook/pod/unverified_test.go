package pod

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// readyPod is a pod of the asynchronous test plugin whose stored network-status is Ready.
func readyPod(t *testing.T) *corev1.Pod {
	t.Helper()
	p := gamePod(asyncNm)
	if err := networkstatus.SetStatus(p, nil, networkstatus.NetworkStatus{
		CurrentNetworkState: networkstatus.NetworkReady, DesiredNetworkState: networkstatus.NetworkReady, NetworkType: asyncNm,
	}, testNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUnknownIsNotBroken: at an UPDATE of a pod whose network is Ready, a plugin failure that
// says nothing about the network (a failed read, a timeout) keeps the network-status as it
// was, writes no retry state (no window, no exhausted action), marks the pod unverified since
// the first such failure, and warns; a failure that observed the network wrong (a failed
// create after the object was seen missing) marks it NotReady as before; a success clears the
// mark.
func TestUnknownIsNotBroken(t *testing.T) {
	earlier := testNow.Add(-30 * time.Second).UTC().Format(time.RFC3339)
	cases := map[string]struct {
		setup         func(e *env)
		old           func(t *testing.T) *corev1.Pod
		change        func(p *corev1.Pod)
		wantState     networkstatus.NetworkState
		wantRetry     bool
		wantCounted   bool   // the retry state's last error counts toward the window (not Unknown)
		wantSince     string // "" for no unverified mark
		wantOutcome   string
		wantWarning   string
		wantEventType string
	}{
		"failed read: kept Ready": {
			setup: func(e *env) {
				e.async.err = plugin.WrapUnknown(errors.New("the server is currently unable to handle the request"), "get GameServerSet game/gs")
			},
			old:         readyPod,
			wantState:   networkstatus.NetworkReady,
			wantSince:   testNow.Format(time.RFC3339),
			wantOutcome: OutcomeKeptUnverified,
			wantWarning: "could not check the network (apiCallError): get GameServerSet game/gs: the server is currently unable",
		},
		"timeout: kept Ready": {
			setup:       func(e *env) { e.async.sleep = time.Second; e.handler.MaxTimeout = 20 * time.Millisecond },
			old:         readyPod,
			wantState:   networkstatus.NetworkReady,
			wantSince:   testNow.Format(time.RFC3339),
			wantOutcome: OutcomeKeptUnverified,
			wantWarning: "could not check the network (timeout)",
		},
		"failed read again: the first time is kept": {
			setup: func(e *env) { e.async.err = plugin.WrapUnknown(errors.New("throttled"), "get node") },
			old: func(t *testing.T) *corev1.Pod {
				p := readyPod(t)
				p.Annotations[networkretry.UnverifiedAnnotation] = earlier
				return p
			},
			wantState:   networkstatus.NetworkReady,
			wantSince:   earlier,
			wantOutcome: OutcomeKeptUnverified,
			wantWarning: "could not check the network",
		},
		"broken (create failed after the Service was seen gone): NotReady with a retry state": {
			setup: func(e *env) {
				e.async.err = plugin.Wrap(plugin.APICallError, errors.New("exceeded quota"), "create or patch Service game/gs-0")
			},
			old:         readyPod,
			wantState:   networkstatus.NetworkNotReady,
			wantRetry:   true,
			wantOutcome: OutcomeAdmittedNotReady,
			wantWarning: "admitted with network NotReady",
		},
		"patch of the existing Service refused by another admission controller: kept Ready": {
			setup: func(e *env) {
				e.async.err = plugin.WrapWriteRefused(errors.New(`services "gs-0" is forbidden: ValidatingAdmissionPolicy 'freeze' denied request`), "patch Service game/gs-0")
			},
			old:         readyPod,
			wantState:   networkstatus.NetworkReady,
			wantSince:   testNow.Format(time.RFC3339),
			wantOutcome: OutcomeKeptUnverified,
			wantWarning: "could not bring the network's objects up to date (the write was not accepted) (apiCallError): patch Service game/gs-0",
		},
		"patch of the existing Service throttled: kept Ready": {
			setup: func(e *env) {
				e.async.err = plugin.WrapWriteRefused(apierrors.NewTooManyRequests("slow down", 1), "patch Service game/gs-0")
			},
			old:         readyPod,
			wantState:   networkstatus.NetworkReady,
			wantSince:   testNow.Format(time.RFC3339),
			wantOutcome: OutcomeKeptUnverified,
			wantWarning: "the write was not accepted",
		},
		"patch refused on a network that was not Ready: NotReady, the window counts": {
			setup: func(e *env) {
				e.async.err = plugin.WrapWriteRefused(errors.New("exceeded quota"), "patch Service game/gs-0")
			},
			old:         func(*testing.T) *corev1.Pod { return gamePod(asyncNm) },
			wantState:   networkstatus.NetworkNotReady,
			wantRetry:   true,
			wantCounted: true,
			wantOutcome: OutcomeAdmittedNotReady,
			wantWarning: "admitted with network NotReady",
		},
		"failed read on a network that was not Ready: retried as before": {
			setup:       func(e *env) { e.async.err = plugin.WrapUnknown(errors.New("throttled"), "get node") },
			old:         func(*testing.T) *corev1.Pod { return gamePod(asyncNm) },
			wantState:   networkstatus.NetworkNotReady,
			wantRetry:   true,
			wantOutcome: OutcomeAdmittedNotReady,
			wantWarning: "admitted with network NotReady",
		},
		"failed read while network-conf changes: not kept": {
			setup: func(e *env) { e.async.err = plugin.WrapUnknown(errors.New("throttled"), "get node") },
			old:   readyPod,
			change: func(p *corev1.Pod) {
				p.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"PortProtocols","value":"80"}]`
			},
			wantState:   networkstatus.NetworkNotReady,
			wantRetry:   true,
			wantOutcome: OutcomeAdmittedNotReady,
			wantWarning: "admitted with network NotReady",
		},
		"success clears the mark": {
			setup: func(e *env) { e.async.ready = true },
			old: func(t *testing.T) *corev1.Pod {
				p := readyPod(t)
				p.Annotations[networkretry.UnverifiedAnnotation] = earlier
				return p
			},
			wantState:   networkstatus.NetworkReady,
			wantOutcome: OutcomeAllowed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e)
			old := tc.old(t)
			pod := old.DeepCopy()
			pod.Labels = map[string]string{"game.kruise.io/opsState": "Maintaining"}
			if tc.change != nil {
				tc.change(pod)
			}
			req := request(t, admissionv1.Update, pod, old, false)
			resp := e.handler.Handle(context.Background(), req)
			got := admitted(t, req, resp)
			if st, _ := networkstatus.StatusFromPod(got); st == nil || st.CurrentNetworkState != tc.wantState {
				t.Errorf("network-status = %+v, want %s", st, tc.wantState)
			}
			if tc.wantState == networkstatus.NetworkReady && got.Annotations[networkstatus.AnnotationNetworkStatus] != old.Annotations[networkstatus.AnnotationNetworkStatus] && tc.wantSince != "" {
				t.Errorf("network-status bytes changed:\n got  %s\n want %s", got.Annotations[networkstatus.AnnotationNetworkStatus], old.Annotations[networkstatus.AnnotationNetworkStatus])
			}
			if _, ok := got.Annotations[networkretry.Annotation]; ok != tc.wantRetry {
				t.Errorf("retry state present %t, want %t", ok, tc.wantRetry)
			}
			if tc.wantCounted {
				st, err := networkretry.FromPod(got)
				if err != nil || st == nil || st.LastError == nil || st.LastError.Unknown {
					t.Errorf("retry state = %+v (%v), want a last error that is not Unknown", st, err)
				}
			}
			if v := got.Annotations[networkretry.UnverifiedAnnotation]; v != tc.wantSince {
				t.Errorf("%s = %q, want %q", networkretry.UnverifiedAnnotation, v, tc.wantSince)
			}
			if got := pluginLabels(t, e.handler.Metrics.Decisions)[asyncNm+"/"+tc.wantOutcome]; got != 1 {
				t.Errorf("npp_admission_decisions_total{plugin=%s,outcome=%s} = %v, want 1", asyncNm, tc.wantOutcome, got)
			}
			if tc.wantWarning != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tc.wantWarning)) {
				t.Errorf("warnings = %q, want one containing %q", resp.Warnings, tc.wantWarning)
			}
			evs := drain(e.recorder)
			if tc.wantWarning != "" && len(evs) != 1 {
				t.Errorf("events = %q, want one Warning", evs)
			}
		})
	}
}
