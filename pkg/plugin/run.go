package plugin

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Operation is the admission operation a plugin runs for; the values are the
// admission API's operation names.
type Operation string

const (
	// OperationCreate runs Plugin.OnPodAdded.
	OperationCreate Operation = "CREATE"
	// OperationUpdate runs Plugin.OnPodUpdated.
	OperationUpdate Operation = "UPDATE"
	// OperationDelete runs Plugin.OnPodDeleted.
	OperationDelete Operation = "DELETE"
)

// Run calls the plugin function for op on a deep copy of pod, under a deadline of
// timeout (no extra deadline when timeout <= 0; ctx's own deadline always applies).
//
// It returns the plugin's pod (the copy, possibly mutated; for DELETE or a nil result,
// the unmodified copy) and its error, nil or an error that Split takes apart: an *Error,
// or the plugin's warnings joined (errors.Join) with its failure as an *Error:
//   - the deadline passed first: a Timeout error naming the plugin, the operation and
//     the timeout; the plugin keeps running in the background with a cancelled context
//     and its late result is discarded (its changes never reach the caller's pod);
//   - the plugin panicked: an InternalError naming the plugin and the operation; the
//     panic value and the stack are logged through ctrl.LoggerFrom(ctx), never put in
//     the error message;
//   - the plugin returned an error that is not an *Error: an InternalError wrapping it;
//   - the plugin returned warnings only (Split finds no failure): those warnings, with the
//     plugin's pod.
//
// The webhook is the only caller: plugins never call each other through Run.
func Run(ctx context.Context, timeout time.Duration, p Plugin, op Operation, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	var fn func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	switch op {
	case OperationCreate:
		fn = func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) { return p.OnPodAdded(ctx, c, pod) }
	case OperationUpdate:
		fn = func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) { return p.OnPodUpdated(ctx, c, pod) }
	case OperationDelete:
		fn = func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
			return pod, p.OnPodDeleted(ctx, c, pod)
		}
	default:
		return pod, Errorf(NotImplementedError, "plugin %s: operation %q is not one of CREATE, UPDATE, DELETE", p.Name(), op)
	}
	in := pod.DeepCopy()
	out, err := call(ctx, timeout, p.Name(), op, func(ctx context.Context) (*corev1.Pod, error) { return fn(ctx, in) },
		"pod", klog.KObj(pod))
	if out == nil {
		out = pod.DeepCopy()
	}
	return out, err
}

type result[T any] struct {
	val T
	err error
}

// call runs fn under the deadline and panic recovery that Run documents and returns
// its value (the zero value on timeout or panic) and its error as an *Error.
func call[T any](ctx context.Context, timeout time.Duration, name string, op Operation, fn func(ctx context.Context) (T, error), logKV ...any) (T, error) {
	log := ctrl.LoggerFrom(ctx).WithValues(append([]any{"plugin", name, "operation", op}, logKV...)...)
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	done := make(chan result[T], 1)
	go func() {
		var r result[T]
		defer func() {
			if v := recover(); v != nil {
				log.Error(fmt.Errorf("panic: %v", v), "Plugin panicked", "stack", string(debug.Stack()))
				var zero T
				r = result[T]{val: zero, err: Errorf(InternalError, "plugin %s panicked during %s", name, op)}
			}
			done <- r
		}()
		r.val, r.err = fn(ctx)
	}()

	finish := func(r result[T]) (T, error) {
		return r.val, resultError(ctx, r.err, name, op, timeout)
	}
	select {
	case r := <-done:
		return finish(r)
	case <-ctx.Done():
		select {
		case r := <-done: // finished at the deadline: keep the result
			return finish(r)
		default:
		}
		var zero T
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return zero, &Error{Type: Timeout, Message: fmt.Sprintf("plugin %s did not finish %s within %s", name, op, timeoutText(timeout)), Err: ctx.Err()}
		}
		return zero, &Error{Type: Timeout, Message: fmt.Sprintf("plugin %s was cancelled during %s", name, op), Err: ctx.Err()}
	}
}

func timeoutText(timeout time.Duration) string {
	if timeout > 0 {
		return timeout.String()
	}
	return "the request deadline"
}

// resultError turns the error a plugin returned into the error that Run returns: nil stays
// nil; warnings (see Split) are kept; a failure that is not an *Error becomes an
// InternalError; and a plugin that gave up because ctx's deadline passed (it returned
// ctx.Err() or an error wrapping it, untyped or as an InternalError) ran out of time, which
// is a Timeout, whether Run saw its result or the deadline first.
func resultError(ctx context.Context, err error, name string, op Operation, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	failure, warnings := Split(err)
	if failure != nil && failure.Type == InternalError && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		failure = &Error{Type: Timeout, Message: fmt.Sprintf("plugin %s did not finish %s within %s", name, op, timeoutText(timeout)), Err: err}
	}
	errs := make([]error, 0, len(warnings)+1)
	if failure != nil {
		errs = append(errs, failure)
	}
	for _, w := range warnings {
		errs = append(errs, w)
	}
	switch len(errs) {
	case 0: // a join of nothing
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// noPrediction is the context key of WithoutPrediction.
type noPrediction struct{}

// WithoutPrediction returns ctx marked so that a plugin does not refuse a write from what
// its caches predict (a NodePort Service create over a cached ResourceQuota): the write goes
// to the API server, whose answer is the truth. The webhook marks the run that would close a
// retry window after a predicted refusal (Error.FromCache), so that no window closes on a
// prediction.
func WithoutPrediction(ctx context.Context) context.Context {
	return context.WithValue(ctx, noPrediction{}, true)
}

// PredictionAllowed reports whether ctx lets a plugin refuse a write from its caches (see
// WithoutPrediction).
func PredictionAllowed(ctx context.Context) bool {
	v, _ := ctx.Value(noPrediction{}).(bool)
	return !v
}
