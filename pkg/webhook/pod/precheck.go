package pod

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// PrecheckTimeout bounds one Precheck: the plugin reads only the manager's caches, which
// answer in microseconds, so a run that takes longer is waiting for something else (an
// informer that has not synced) and tells nothing. 1 s.
const PrecheckTimeout = time.Second

// errWouldWrite is what every write of the precheck client returns: the plugin run would
// change the cluster, so only a real run can tell how it ends.
var errWouldWrite = fmt.Errorf("precheck: %w to the API server", plugin.ErrWouldWrite)

// Precheck runs the pod's network plugin of plugins (its UPDATE path, OnPodUpdated, the same
// code the webhook runs) against c, the manager's cached client, with every write refused, on
// a copy of pod, and
// reports the failure the next real run would record, as the webhook records it in the
// retry state (networkretry.Error: type, message without the type prefix, Unknown). ok is
// false when the caches cannot tell: the plugin would write (create or patch a Service or
// Ingress), it succeeds or only warns, its failure is inconclusive (Unknown, a timeout, a
// panic), the network type is not a registered plugin, or it runs longer than
// PrecheckTimeout. The run's context is plugin.ReadOnly, so that a plugin that writes
// elsewhere than through c (a load-balancer plugin's port ledger and allocator) writes
// nothing either. The network controller uses it to skip a retry that would fail exactly as
// the last one did without writing the pod; nothing it does is visible outside this
// process.
func Precheck(ctx context.Context, plugins *plugin.Registry, c client.Client, pod *corev1.Pod) (_ *networkretry.Error, ok bool) {
	p, err := plugins.Lookup(pod.Annotations[networkstatus.AnnotationNetworkType])
	if err != nil || p == nil {
		return nil, false
	}
	_, err = plugin.Run(plugin.ReadOnly(ctx), PrecheckTimeout, p, plugin.OperationUpdate, cacheOnly{c}, pod)
	failure, _ := plugin.Split(err)
	if failure == nil || failure.Inconclusive() || errors.Is(failure, plugin.ErrWouldWrite) {
		return nil, false
	}
	return &networkretry.Error{Type: string(failure.Type), Message: errorText(failure), Reason: string(failure.ReasonOf()), FromCache: failure.FromCache}, true
}

// cacheOnly is a client whose reads are the wrapped client's (the manager's cached client)
// and whose writes all fail with errWouldWrite, before anything is sent.
type cacheOnly struct{ client.Client }

func (cacheOnly) Create(context.Context, client.Object, ...client.CreateOption) error {
	return errWouldWrite
}
func (cacheOnly) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return errWouldWrite
}
func (cacheOnly) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errWouldWrite
}
func (cacheOnly) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errWouldWrite
}
func (cacheOnly) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	return errWouldWrite
}
func (cacheOnly) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errWouldWrite
}
func (cacheOnly) Status() client.SubResourceWriter { return refusedWriter{} }
func (c cacheOnly) SubResource(sub string) client.SubResourceClient {
	return refusedSubResource{SubResourceReader: c.Client.SubResource(sub)}
}

// refusedWriter refuses every subresource write with errWouldWrite.
type refusedWriter struct{}

func (refusedWriter) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errWouldWrite
}
func (refusedWriter) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return errWouldWrite
}
func (refusedWriter) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errWouldWrite
}
func (refusedWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errWouldWrite
}

// refusedSubResource reads subresources through the wrapped client and refuses writes.
type refusedSubResource struct {
	client.SubResourceReader
	refusedWriter
}
