package cel

import (
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is a typed Kubernetes object (a *corev1.Pod or *corev1.Namespace).
type Object interface {
	metav1.Object
	runtime.Object
}

// Request is the part of the admission request expressions see as the variable request.
type Request struct {
	// Operation is CREATE, UPDATE or DELETE.
	Operation string
	// UserInfo is the requesting user.
	UserInfo authenticationv1.UserInfo
	// DryRun is true for a dry-run request.
	DryRun bool
}

// Plugin is what expressions see as the variable plugin.
type Plugin struct {
	// Name is the plugin's exact name, for example Kubernetes-NodePort.
	Name string
	// Alias is the plugin's family name, possibly empty.
	Alias string
	// Synchronous is the plugin's built-in failure mode.
	Synchronous bool
}

// PluginError is what failure and retry expressions see as the variable error.
type PluginError struct {
	// Type is the error category, for example apiCallError or timeout.
	Type string
	// Message is the error text.
	Message string
	// Reason is the failure's class within its type (plugin.Reason: PortsExhausted,
	// QuotaExceeded, CloudRefused, ...); empty for a failure that has none (a simulated one).
	Reason string
}

// Network is what spec.networkConfRules see as the variable network: the network-conf as the
// pod's plugin reads it (plugin.NetworkView).
type Network struct {
	// LoadBalancerIDs are the load balancers the network-conf names.
	LoadBalancerIDs []string
	// Ports are the ports it asks for.
	Ports []Port
	// Hosts and Classes are the Ingress hosts and classes it asks for.
	Hosts, Classes []string
	// CreatesCloudResources is true when the network makes a billable cloud resource (an
	// auto-created load balancer, a new EIP, an operator's cloud object).
	CreatesCloudResources bool
	// Parameters are the raw network-conf entries, in order.
	Parameters []Parameter
}

// Port is one port of Network: a number and its protocol (TCP, UDP, TCPUDP, ...).
type Port struct {
	Port     int32
	Protocol string
}

// Parameter is one network-conf entry.
type Parameter struct {
	Name, Value string
}

// Variables are the inputs of one admission request.
type Variables struct {
	// Object is the pod (for DELETE the pod being deleted). Nil evaluates as null.
	Object Object
	// OldObject is the pod before UPDATE or DELETE; nil (CREATE) evaluates as null.
	OldObject Object
	// Namespace is the pod's namespace; nil evaluates as null.
	Namespace Object
	// Request is the admission request.
	Request Request
	// Plugin is the network plugin.
	Plugin Plugin
	// Error is the plugin's error; nil evaluates as null.
	Error *PluginError
	// Network is the pod's network-conf as its plugin reads it, for spec.networkConfRules;
	// nil evaluates as an empty view.
	Network *Network
}

// Activation binds Variables to the expressions of one admission request and carries the
// request's cost Budget. Objects are converted to CEL values lazily, on the first access of
// each variable, and at most once per request: metadata name, namespace, labels and
// annotations are read from the typed object directly; any other field converts the object
// with runtime.DefaultUnstructuredConverter once. metadata.labels and metadata.annotations are
// always present (empty when the object has none), so "'x' in object.metadata.labels" never
// fails. An Activation is not safe for concurrent use.
type Activation struct {
	vars   Variables
	budget Budget

	object, oldObject, namespace, request, plugin, pluginError, network ref.Val
}

var _ interpreter.Activation = (*Activation)(nil)

// NewActivation returns an activation for vars with a budget of DefaultBudget.
func NewActivation(vars Variables) *Activation {
	return NewActivationWithBudget(vars, DefaultBudget)
}

// NewActivationWithBudget returns an activation for vars with a budget of limit cost units.
func NewActivationWithBudget(vars Variables, limit int64) *Activation {
	return &Activation{vars: vars, budget: NewBudget(limit)}
}

// Budget returns the request's remaining cost budget.
func (a *Activation) Budget() *Budget { return &a.budget }

// SetError replaces the error variable, for evaluating failure expressions after the plugin
// ran; nil evaluates as null.
func (a *Activation) SetError(err *PluginError) {
	a.vars.Error = err
	a.pluginError = nil
}

// SetNetwork replaces the network variable, for evaluating spec.networkConfRules once the
// view is built; nil evaluates as an empty view.
func (a *Activation) SetNetwork(n *Network) {
	a.vars.Network = n
	a.network = nil
}

// ResolveName implements interpreter.Activation.
func (a *Activation) ResolveName(name string) (any, bool) {
	switch name {
	case VarObject:
		if a.object == nil {
			a.object = objectVal(a.vars.Object)
		}
		return a.object, true
	case VarOldObject:
		if a.oldObject == nil {
			a.oldObject = objectVal(a.vars.OldObject)
		}
		return a.oldObject, true
	case VarNamespaceObject:
		if a.namespace == nil {
			a.namespace = objectVal(a.vars.Namespace)
		}
		return a.namespace, true
	case VarRequest:
		if a.request == nil {
			a.request = requestVal(a.vars.Request)
		}
		return a.request, true
	case VarPlugin:
		if a.plugin == nil {
			a.plugin = types.DefaultTypeAdapter.NativeToValue(map[string]any{
				"name":        a.vars.Plugin.Name,
				"alias":       a.vars.Plugin.Alias,
				"synchronous": a.vars.Plugin.Synchronous,
			})
		}
		return a.plugin, true
	case VarError:
		if a.pluginError == nil {
			if a.vars.Error == nil {
				a.pluginError = types.NullValue
			} else {
				a.pluginError = types.DefaultTypeAdapter.NativeToValue(map[string]any{
					"type":    a.vars.Error.Type,
					"message": a.vars.Error.Message,
					"reason":  a.vars.Error.Reason,
				})
			}
		}
		return a.pluginError, true
	case VarNetwork:
		if a.network == nil {
			a.network = networkVal(a.vars.Network)
		}
		return a.network, true
	}
	return nil, false
}

func networkVal(n *Network) ref.Val {
	if n == nil {
		n = &Network{}
	}
	ports := make([]map[string]any, len(n.Ports))
	for i, p := range n.Ports {
		ports[i] = map[string]any{"port": int64(p.Port), "protocol": p.Protocol}
	}
	params := make([]map[string]any, len(n.Parameters))
	for i, p := range n.Parameters {
		params[i] = map[string]any{"name": p.Name, "value": p.Value}
	}
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]any{
		"loadBalancerIDs":       orEmpty(n.LoadBalancerIDs),
		"ports":                 ports,
		"hosts":                 orEmpty(n.Hosts),
		"classes":               orEmpty(n.Classes),
		"createsCloudResources": n.CreatesCloudResources,
		"parameters":            params,
	})
}

// Parent implements interpreter.Activation.
func (a *Activation) Parent() interpreter.Activation { return nil }

func objectVal(obj Object) ref.Val {
	if obj == nil || isNilPointer(obj) {
		return types.NullValue
	}
	return &objectValue{obj: obj}
}

func requestVal(r Request) ref.Val {
	extra := make(map[string][]string, len(r.UserInfo.Extra))
	for k, v := range r.UserInfo.Extra {
		extra[k] = v
	}
	groups := r.UserInfo.Groups
	if groups == nil {
		groups = []string{}
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]any{
		"operation": r.Operation,
		"userInfo": map[string]any{
			"username": r.UserInfo.Username,
			"uid":      r.UserInfo.UID,
			"groups":   groups,
			"extra":    extra,
		},
		"dryRun": r.DryRun,
	})
}
