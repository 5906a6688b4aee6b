package pod

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// fixedWarning is what the HostPort plugin returns for an extra Fixed parameter.
var fixedWarning = &plugin.Error{Type: plugin.ParameterError, Param: "Fixed", Warning: true,
	Message: "Test-Sync ignores unknown network-conf parameters, expected only ContainerPorts"}

// TestWarningsAdmit: a plugin that did its work but warns admits the pod under the
// built-in Synchronous default: the plugin's status and changes are kept, each warning is an
// admission warning naming its parameter, a Ready network gets no retry state, the decision
// annotation is the usual one, and the event is recorded only when the network's inputs
// change.
func TestWarningsAdmit(t *testing.T) {
	pathWarning := &plugin.Error{Type: plugin.ParameterError, Param: "Path", Warning: true, Message: "has no <id>"}
	cases := map[string]struct {
		err          error
		ready        bool
		wantWarnings []string
	}{
		"one warning, network Ready": {
			err: fixedWarning, ready: true,
			wantWarnings: []string{"network plugin Test-Sync warns (parameterError): parameter Fixed: Test-Sync ignores unknown network-conf parameters, expected only ContainerPorts; the pod is admitted with the plugin's changes"},
		},
		"two warnings joined": {
			err: errors.Join(fixedWarning, pathWarning), ready: true,
			wantWarnings: []string{
				"network plugin Test-Sync warns (parameterError): parameter Fixed: ",
				"network plugin Test-Sync warns (parameterError): parameter Path: has no <id>",
			},
		},
		"warning, network not Ready yet": {
			err:          fixedWarning,
			wantWarnings: []string{"parameter Fixed"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.sync.err, e.sync.ready = tc.err, tc.ready
			e.sync.mutate = func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, HostPort: 8000}}
			}
			req := request(t, admissionv1.Create, gamePod(syncName), nil, false)
			resp := e.handler.Handle(context.Background(), req)
			got := admitted(t, req, resp)

			if len(resp.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings = %q, want %d", resp.Warnings, len(tc.wantWarnings))
			}
			for i, want := range tc.wantWarnings {
				if !strings.Contains(resp.Warnings[i], want) {
					t.Errorf("warning %d = %q, want it to contain %q", i, resp.Warnings[i], want)
				}
			}
			if diff := cmp.Diff([]corev1.ContainerPort{{Name: "game", ContainerPort: 7777, HostPort: 8000}}, got.Spec.Containers[0].Ports); diff != "" {
				t.Errorf("the plugin's changes were not kept (-want,+got):\n%s", diff)
			}
			wantState := networkstatus.NetworkNotReady
			if tc.ready {
				wantState = networkstatus.NetworkReady
			}
			if st, _ := networkstatus.StatusFromPod(got); st == nil || st.CurrentNetworkState != wantState {
				t.Errorf("network-status = %+v, want the plugin's %s", st, wantState)
			}
			state, err := networkretry.FromPod(got)
			switch {
			case err != nil:
				t.Errorf("retry state: %v", err)
			case tc.ready && state != nil:
				t.Errorf("retry state %+v on a Ready network", state)
			case !tc.ready && (state == nil || state.LastError != nil):
				t.Errorf("retry state %+v, want one without an error (the network is only not Ready yet)", state)
			}
			if got, want := got.Annotations[AnnotationDecision], "Synchronous by built-in default"; got != want {
				t.Errorf("%s = %q, want %q", AnnotationDecision, got, want)
			}
			if evs := drain(e.recorder); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+ReasonNetworkPluginWarning) ||
				!strings.Contains(evs[0], "parameter Fixed") {
				t.Errorf("events = %q, want one %s naming Fixed", evs, ReasonNetworkPluginWarning)
			}
			want := map[string]float64{syncName + "/allowed_with_warnings": 1}
			if got := pluginLabels(t, e.handler.Metrics.Decisions); !equalCounts(got, want) {
				t.Errorf("npp_admission_decisions_total = %v, want %v", got, want)
			}

			// An UPDATE that leaves the network's inputs alone warns again, without an event.
			updated := got.DeepCopy()
			updated.Labels = map[string]string{"version": "2"}
			req = request(t, admissionv1.Update, updated, got, false)
			resp = e.handler.Handle(context.Background(), req)
			admitted(t, req, resp)
			if len(resp.Warnings) != len(tc.wantWarnings) {
				t.Errorf("UPDATE warnings = %q, want %d", resp.Warnings, len(tc.wantWarnings))
			}
			if evs := drain(e.recorder); len(evs) != 0 {
				t.Errorf("UPDATE events = %q, want none", evs)
			}
		})
	}
}

// TestWarningsBesideAFailure: a failure joined with warnings goes through the failure mode
// (here the built-in Synchronous default denies); the warnings still reach the client.
func TestWarningsBesideAFailure(t *testing.T) {
	e := newEnv(t)
	e.sync.err = errors.Join(fixedWarning, plugin.Errorf(plugin.InternalError, "no free host port"))
	resp := e.handler.Handle(context.Background(), request(t, admissionv1.Create, gamePod(syncName), nil, false))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "failed (internalError): no free host port; denied by built-in default") {
		t.Errorf("allowed %v, result %v; want denied for the internalError", resp.Allowed, resp.Result)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "parameter Fixed") {
		t.Errorf("warnings = %q, want the Fixed warning", resp.Warnings)
	}
	if strings.Contains(resp.Result.Message, "Fixed") {
		t.Errorf("the denial names the warning: %q", resp.Result.Message)
	}
}

// TestRepeatedFailure: a failure is a repeat only when the stored retry state's lastError
// has the same type and message.
func TestRepeatedFailure(t *testing.T) {
	withState := func(last *networkretry.Error) *corev1.Pod {
		st := &networkretry.State{Plugin: "Kubernetes-NodePort", Policy: networkretry.BuiltInDefault, Attempts: 3, LastError: last,
			Since: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second)), LastAttempt: metav1.NewTime(time.Now().Truncate(time.Second)),
			Window: metav1.Duration{Duration: time.Hour}, Interval: metav1.Duration{Duration: 5 * time.Second}, MaxInterval: metav1.Duration{Duration: 30 * time.Second},
			ExhaustedAction: policyv1alpha1.ExhaustedActionEvent}
		v, err := st.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{networkretry.Annotation: v}}}
	}
	quota := &networkretry.Error{Type: "apiCallError", Message: "exceeded quota"}
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"same type and message": {withState(quota), true},
		"another message":       {withState(&networkretry.Error{Type: "apiCallError", Message: "connection refused"}), false},
		"another type":          {withState(&networkretry.Error{Type: "timeout", Message: "exceeded quota"}), false},
		"no last error":         {withState(nil), false},
		"no retry state":        {&corev1.Pod{}, false},
		"malformed retry state": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{networkretry.Annotation: "{"}}}, false},
	}
	for name, tc := range cases {
		prev, err := networkretry.FromPod(tc.pod)
		if err != nil {
			prev = nil // as the handler passes a malformed state
		}
		if got := repeatedFailure(prev, plugin.APICallError, "exceeded quota"); got != tc.want {
			t.Errorf("%s: repeatedFailure = %v, want %v", name, got, tc.want)
		}
	}
}

// TestNotableWarningIsAnEvent: a plugin.Error.Notable warning (a load-balancer Service field
// rewritten again after its repair) is recorded as a NetworkPluginWarning Event naming it
// even at an UPDATE that leaves the network's inputs alone, where a plain warning is not.
func TestNotableWarningIsAnEvent(t *testing.T) {
	for _, notable := range []bool{true, false} {
		e := newEnv(t)
		e.sync.ready = true
		e.sync.err = &plugin.Error{Warning: true, Notable: notable,
			Message: "Service game/gs-0: metadata.annotations[x] changed by someone else, put back (the network stays Ready); changed again after each of 1 repairs"}
		stored := gamePod(syncName)
		updated := stored.DeepCopy()
		updated.Labels = map[string]string{"version": "2"}
		req := request(t, admissionv1.Update, updated, stored, false)
		admitted(t, req, e.handler.Handle(context.Background(), req))
		evs := drain(e.recorder)
		switch {
		case notable && (len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+ReasonNetworkPluginWarning) || !strings.Contains(evs[0], "metadata.annotations[x]")):
			t.Errorf("Notable: events %q, want one %s naming the field", evs, ReasonNetworkPluginWarning)
		case !notable && len(evs) != 0:
			t.Errorf("not Notable: events %q, want none", evs)
		}
	}
}
