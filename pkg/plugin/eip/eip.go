// Package eip is the engine of OKG's EIP plugins (family E: Volcengine-EIP, HwCloud-CCE-EIP,
// JdCloud-EIP, AlibabaCloud-EIP, and AlibabaCloud-NATGW, which works the same way): a plugin
// that writes no object, asks the provider's network controller for an address through pod
// annotations at CREATE, and reports the controller's answer, pod annotations or an object
// of the controller's named after the pod (Spec.Read), as the network-status at each UPDATE. A provider package fills in a Spec with
// what its controller reads and writes (for example pkg/plugin/volcengine's eip.go).
package eip

import (
	"context"
	"net"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// Spec describes one EIP plugin to the engine.
type Spec struct {
	// Name and Alias are OKG's network type and family, e.g. "JdCloud-EIP", "EIP-Network".
	Name, Alias string
	// Ask writes on pod (its annotations exist) the annotations with which the controller binds
	// an EIP, from conf, the decoded network-conf. It returns nil, a warning (plugin.IsWarning:
	// the pod is admitted as written) or a ParameterError naming the parameter.
	Ask func(pod *corev1.Pod, conf networkstatus.Conf) error
	// Answer reads the controller's answer on pod: the addresses, and ok false while it has
	// not answered. An answer that cannot be read is a ParameterError naming its annotation.
	Answer func(pod *corev1.Pod) (internal, external []networkstatus.NetworkAddress, ok bool, err error)
	// Read, when set, reads the controller's answer from an object of the controller's own,
	// in the pod's namespace and named after the pod (Objects), through c, the manager's
	// cached client; Answer is then not used. It returns the addresses and ok false while the
	// controller has not answered; ready says whether the answer is whole: an answer that is
	// not keeps the state as it was, with the addresses written (OKG's AlibabaCloud-NATGW).
	// An error is returned as the run's.
	Read func(ctx context.Context, c client.Reader, pod *corev1.Pod) (internal, external []networkstatus.NetworkAddress, ready, ok bool, err error)
	// Objects are the kinds Read reads (unstructured objects with their apiVersion and kind,
	// and the status fields that hold the answer): the manager caches them
	// (plugin.CachedReader) and retries the pod of an object's name at once when those fields
	// change (plugin.ResultObjectsReader).
	Objects []plugin.ResultKind
	// Results are the annotation keys Answer reads: the webhook takes a change of them only
	// from Writers (plugin.ResultReader).
	Results []string
	// Writers are the provider table's result writers: the controller's identities.
	Writers plugin.ResultWriters
	// Creates reports whether conf asks the controller for a new EIP (a billable resource
	// the platform did not name) rather than binding an existing one; nil: always a new one.
	Creates func(conf networkstatus.Conf) bool
	// CreatesParams are the parameters that decide Creates, for refusals that name them.
	CreatesParams []string
}

// Plugin is an EIP plugin built from a Spec: plugin.Plugin, with no state (safe for concurrent
// use). Create one with New.
type Plugin struct {
	spec Spec
	// reader is what the Spec's Read reads through (UseResultReader); nil: the client of
	// the run.
	reader client.Reader
}

// UseResultReader makes the Spec's Read read through r, the manager's cache, rather than the
// client a run is given: controller-runtime's client reads unstructured objects from the API
// server, and a plugin's answer must come from the cache (no request per admission, and the
// network controller's precheck reads caches only). Call it before the plugin serves.
func (p *Plugin) UseResultReader(r client.Reader) { p.reader = r }

var (
	_ plugin.Plugin              = (*Plugin)(nil)
	_ plugin.ConfValidator       = (*Plugin)(nil)
	_ plugin.ResultReader        = (*Plugin)(nil)
	_ plugin.NetworkViewer       = (*Plugin)(nil)
	_ plugin.CachedReader        = (*Plugin)(nil)
	_ plugin.ResultObjectsReader = (*Plugin)(nil)
)

// NetworkView describes the pod's network-conf for the network-conf rules: whether it asks
// for a new EIP (the Spec's Creates). Errors: a network-conf that is not JSON, or the Spec's
// Ask refusing it (ValidateConf).
func (p *Plugin) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	if err := p.ValidateConf(pod); err != nil && !plugin.IsWarning(err) {
		return plugin.NetworkView{}, err
	}
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	creates := p.spec.Creates == nil || p.spec.Creates(conf)
	return plugin.NetworkView{CreatesCloudResources: creates, Params: map[string][]string{"createsCloudResources": p.spec.CreatesParams}}, nil
}

// ResultAnnotations returns the Spec's Results.
func (p *Plugin) ResultAnnotations() []string { return p.spec.Results }

// TrustsResultWriter reports whether the Spec's Writers trust user.
func (p *Plugin) TrustsResultWriter(user authenticationv1.UserInfo) bool {
	return p.spec.Writers.Trusts(user)
}

// ValidateConf checks the pod's network-conf as OnPodAdded does (the Spec's Ask, on a copy of
// the pod), writing nothing: a network-conf that is not JSON, or a ParameterError or warning
// of Ask.
func (p *Plugin) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	cp := pod.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	return p.spec.Ask(cp, conf)
}

// New returns the plugin of spec.
func New(spec Spec) *Plugin { return &Plugin{spec: spec} }

// Name returns the Spec's Name.
func (p *Plugin) Name() string { return p.spec.Name }

// Alias returns the Spec's Alias.
func (p *Plugin) Alias() string { return p.spec.Alias }

// IsSynchronous returns false: the EIP is bound after the pod exists.
func (p *Plugin) IsSynchronous() bool { return false }

// Init does nothing: the plugin keeps no state.
func (p *Plugin) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodDeleted does nothing: the controller releases what it bound.
func (p *Plugin) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// OnPodAdded decodes the network-conf and has the Spec's Ask write its annotations. A
// network-conf that is not JSON is a ParameterError naming the annotation.
func (p *Plugin) OnPodAdded(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	return pod, p.spec.Ask(pod, conf)
}

// OnPodUpdated writes a Waiting status when the pod has none (OKG's first run); a network-conf
// that is not JSON is then a ParameterError naming it, at every run. Then it reads
// the Spec's Answer (or Read, through c): an error is returned as it is; no answer yet leaves
// the status as it is; an answer writes its addresses and, when whole, makes the status
// Ready (other fields of the status kept, as OKG's plugins keep the struct they parsed).
func (p *Plugin) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	// A network-conf that is not JSON never wrote the controller's annotations: FirstRun says
	// so, and the next lines at every later run (OKG panics at both).
	prev, err := networkstatus.FirstRun(pod)
	if prev == nil {
		return pod, err
	}
	if _, err := networkstatus.ConfFromPod(pod); err != nil {
		return pod, err
	}
	var internal, external []networkstatus.NetworkAddress
	var ready, ok bool
	if p.spec.Read != nil {
		var r client.Reader = c
		if p.reader != nil {
			r = p.reader
		}
		internal, external, ready, ok, err = p.spec.Read(ctx, r, pod)
	} else {
		internal, external, ok, err = p.spec.Answer(pod)
		ready = ok
	}
	if err != nil || !ok {
		return pod, err
	}
	st := *prev
	st.InternalAddresses, st.ExternalAddresses = internal, external
	if ready {
		st.CurrentNetworkState = networkstatus.NetworkReady
	}
	return pod, networkstatus.PutStatus(pod, st)
}

// CachedObjects returns the objects of the Spec's Objects (plugin.CachedReader).
func (p *Plugin) CachedObjects() []client.Object {
	var out []client.Object
	for _, k := range p.spec.Objects {
		out = append(out, k.Object)
	}
	return out
}

// ResultObjects returns the Spec's Objects (plugin.ResultObjectsReader).
func (p *Plugin) ResultObjects() []plugin.ResultKind { return p.spec.Objects }

// Unread returns a warning naming the parameters of conf that are not in known (the plugin
// does not pass them on; OKG ignores them silently), nil when there are none.
func Unread(name string, conf networkstatus.Conf, known []string) error {
	return conf.Warn(networkstatus.NotIn(known...), name+" does not pass these parameters on, expected only "+strings.Join(known, ", "))
}

// Annotated reads an EIP address that a controller wrote in pod's annotation key: the pod's IP
// inside and the EIP outside, or no answer while the annotation is missing or empty; a value
// that is not an IP address is a ParameterError naming key. A Spec's Answer for controllers
// that answer with one address.
func Annotated(pod *corev1.Pod, key string) (internal, external []networkstatus.NetworkAddress, ok bool, err error) {
	ip := pod.Annotations[key]
	if ip == "" {
		return nil, nil, false, nil
	}
	if net.ParseIP(ip) == nil {
		return nil, nil, false, plugin.ParamErrorf(key, "%q is not an IP address", ip)
	}
	return []networkstatus.NetworkAddress{{IP: pod.Status.PodIP}}, []networkstatus.NetworkAddress{{IP: ip}}, true, nil
}
