package plugin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

func TestRun(t *testing.T) {
	label := func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
		pod.Labels = map[string]string{"done": "yes"}
		return pod, nil
	}
	cases := map[string]struct {
		op          plugin.Operation
		timeout     time.Duration
		onAdd       func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
		onDelete    func(ctx context.Context, pod *corev1.Pod) error
		wantType    plugin.ErrorType
		wantMsg     string
		wantLabels  map[string]string
		wantLogPart string
	}{
		"success returns the mutated copy": {
			op: plugin.OperationCreate, timeout: time.Second, onAdd: label,
			wantLabels: map[string]string{"done": "yes"},
		},
		"update runs OnPodUpdated": {
			op: plugin.OperationUpdate, timeout: time.Second, onAdd: label,
			wantLabels: map[string]string{"done": "yes"},
		},
		"nil pod means unchanged": {
			op: plugin.OperationCreate, timeout: time.Second,
			onAdd: func(context.Context, *corev1.Pod) (*corev1.Pod, error) { return nil, nil },
		},
		"delete": {
			op: plugin.OperationDelete, timeout: time.Second,
			onDelete: func(context.Context, *corev1.Pod) error { return plugin.Errorf(plugin.APICallError, "gone") },
			wantType: plugin.APICallError, wantMsg: "apiCallError: gone",
		},
		"typed error passes through with the pod": {
			op: plugin.OperationCreate, timeout: time.Second,
			onAdd: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
				pod.Labels = map[string]string{"status": "NotReady"}
				return pod, plugin.ParamErrorf("Path", "is required")
			},
			wantType: plugin.ParameterError, wantMsg: "parameterError: parameter Path: is required",
			wantLabels: map[string]string{"status": "NotReady"},
		},
		"plain error becomes internalError": {
			op: plugin.OperationCreate, timeout: time.Second,
			onAdd:    func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) { return pod, errBoom },
			wantType: plugin.InternalError, wantMsg: "internalError: plugin failed: boom",
		},
		"deadline passed is a timeout": {
			op: plugin.OperationCreate, timeout: 20 * time.Millisecond,
			onAdd: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
				sleepUntilDone(ctx, time.Minute)
				time.Sleep(10 * time.Millisecond) // late result must be discarded
				pod.Labels = map[string]string{"late": "yes"}
				return pod, nil
			},
			wantType: plugin.Timeout, wantMsg: "timeout: plugin P did not finish CREATE within 20ms: context deadline exceeded",
		},
		"plugin ignoring its context still times out": {
			op: plugin.OperationUpdate, timeout: 20 * time.Millisecond,
			onAdd: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
				time.Sleep(200 * time.Millisecond)
				return pod, nil
			},
			wantType: plugin.Timeout, wantMsg: "timeout: plugin P did not finish UPDATE within 20ms: context deadline exceeded",
		},
		"panic becomes internalError without the stack": {
			op: plugin.OperationCreate, timeout: time.Second,
			onAdd: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
				var m map[string]string
				m["x"] = "y" //nolint:staticcheck // SA5000: the nil map write is the panic under test
				return pod, nil
			},
			wantType: plugin.InternalError, wantMsg: "internalError: plugin P panicked during CREATE",
			wantLogPart: "goroutine",
		},
		"panic in delete": {
			op: plugin.OperationDelete, timeout: time.Second,
			onDelete: func(context.Context, *corev1.Pod) error { panic("bad") },
			wantType: plugin.InternalError, wantMsg: "internalError: plugin P panicked during DELETE",
			wantLogPart: "panic: bad",
		},
		"warning keeps the plugin's pod": {
			op: plugin.OperationCreate, timeout: time.Second,
			onAdd: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
				pod.Labels = map[string]string{"status": "Ready"}
				return pod, &plugin.Error{Type: plugin.ParameterError, Param: "Fixed", Message: "ignored", Warning: true}
			},
			wantType: plugin.ParameterError, wantMsg: "parameterError: parameter Fixed: ignored",
			wantLabels: map[string]string{"status": "Ready"},
		},
		"warnings joined with a plain failure": {
			op: plugin.OperationUpdate, timeout: time.Second,
			onAdd: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
				return pod, errors.Join(&plugin.Error{Type: plugin.ParameterError, Param: "Fixed", Message: "ignored", Warning: true}, errBoom)
			},
			wantType: plugin.InternalError, wantMsg: "internalError: plugin failed: boom\nparameterError: parameter Fixed: ignored",
		},
		"unknown operation": {
			op: "CONNECT", timeout: time.Second,
			wantType: plugin.NotImplementedError, wantMsg: `notImplementedError: plugin P: operation "CONNECT" is not one of CREATE, UPDATE, DELETE`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logs strings.Builder
			logger := funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{})
			ctx := ctrl.LoggerInto(context.Background(), logger)
			p := &fakePlugin{name: "P", onAdd: tc.onAdd, onDelete: tc.onDelete}
			in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: "ns"}}
			out, err := plugin.Run(ctx, tc.timeout, p, tc.op, nil, in)
			if diff := cmp.Diff(tc.wantType, plugin.TypeOf(err)); diff != "" {
				t.Errorf("error type (-want,+got):\n%s\nerror: %v", diff, err)
			}
			if err != nil {
				if diff := cmp.Diff(tc.wantMsg, err.Error()); diff != "" {
					t.Errorf("error (-want,+got):\n%s", diff)
				}
				var perr *plugin.Error
				if !errors.As(err, &perr) {
					t.Errorf("error %T is not a *plugin.Error", err)
				} else if strings.Contains(perr.Error(), "goroutine") {
					t.Errorf("stack leaked into the error: %v", perr)
				}
			}
			if err != nil {
				failure, warnings := plugin.Split(err)
				if failure == nil && len(warnings) == 0 {
					t.Errorf("Split(%v) found neither a failure nor a warning", err)
				}
				if tc.wantType != "" && failure != nil && failure.Type != tc.wantType {
					t.Errorf("Split failure type = %s, want %s", failure.Type, tc.wantType)
				}
			}
			if out == nil {
				t.Fatal("Run returned a nil pod")
			}
			if diff := cmp.Diff(tc.wantLabels, out.Labels); diff != "" {
				t.Errorf("labels (-want,+got):\n%s", diff)
			}
			if in.Labels != nil {
				t.Errorf("caller's pod was mutated: %v", in.Labels)
			}
			if tc.wantLogPart != "" && !strings.Contains(logs.String(), tc.wantLogPart) {
				t.Errorf("log does not contain %q:\n%s", tc.wantLogPart, logs.String())
			}
		})
	}
}

func TestRunParentContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &fakePlugin{name: "P", onAdd: func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
		<-ctx.Done()
		time.Sleep(5 * time.Millisecond)
		return pod, ctx.Err()
	}}
	_, err := plugin.Run(ctx, 0, p, plugin.OperationCreate, nil, &corev1.Pod{})
	if plugin.TypeOf(err) != plugin.Timeout {
		t.Errorf("error = %v, want timeout", err)
	}
}
