package plugin_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// fakePlugin is a Plugin whose operations are functions set by each test.
type fakePlugin struct {
	name, alias string
	sync        bool
	initErr     error
	inits       atomic.Int32
	onAdd       func(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	onDelete    func(ctx context.Context, pod *corev1.Pod) error
}

func (f *fakePlugin) Name() string        { return f.name }
func (f *fakePlugin) Alias() string       { return f.alias }
func (f *fakePlugin) IsSynchronous() bool { return f.sync }
func (f *fakePlugin) Init(context.Context, client.Client, plugin.Config) error {
	f.inits.Add(1)
	return f.initErr
}
func (f *fakePlugin) OnPodAdded(ctx context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return f.onAdd(ctx, pod)
}
func (f *fakePlugin) OnPodUpdated(ctx context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return f.onAdd(ctx, pod)
}
func (f *fakePlugin) OnPodDeleted(ctx context.Context, _ client.Client, pod *corev1.Pod) error {
	return f.onDelete(ctx, pod)
}

var errBoom = errors.New("boom")

// sleepUntilDone blocks until ctx ends or d passes.
func sleepUntilDone(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
