package cel

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Variable names visible to policy expressions.
const (
	// VarObject is the pod being admitted (for DELETE, the pod being deleted), a dynamic map
	// with the pod's JSON field names (object.metadata.labels, object.spec.containers).
	VarObject = "object"
	// VarOldObject is the pod before an UPDATE or DELETE, or null on CREATE.
	VarOldObject = "oldObject"
	// VarNamespaceObject is the pod's Namespace, typed like the apiserver's
	// ValidatingAdmissionPolicy namespaceObject (metadata, spec, status).
	VarNamespaceObject = "namespaceObject"
	// VarRequest holds operation (CREATE, UPDATE, DELETE), userInfo (username, uid, groups,
	// extra) and dryRun (bool) of the admission request.
	VarRequest = "request"
	// VarPlugin holds name, alias (both strings, alias may be empty) and synchronous (bool, the
	// plugin's built-in failure mode) of the network plugin.
	VarPlugin = "plugin"
	// VarError holds type (apiCallError, internalError, parameterError, notImplementedError,
	// retryError, timeout or cloudError), message and reason (plugin.Reason, "" when none)
	// of the plugin error. It is declared only for
	// failureModeExpression and retry.windowExpression.
	VarError = "error"
	// VarNetwork is the network-conf as the pod's plugin reads it (Network): loadBalancerIDs,
	// ports ({port, protocol}), hosts, classes, createsCloudResources and parameters ({name,
	// value}). It is declared only for spec.networkConfRules, which see namespaceObject,
	// request, plugin and network, not the pod (object, oldObject).
	VarNetwork = "network"
)

// CompatibilityVersion is the Kubernetes version whose CEL libraries and language settings
// the NewExpressions environment offers: 1.34. Expressions accepted now therefore also compile
// after a rollback of the manager to a build against Kubernetes 1.34 libraries, and read the
// same as ValidatingAdmissionPolicy expressions on every kube-apiserver from 1.34 on. It is
// explicit, never environment.DefaultCompatibilityVersion(), which follows the binary's
// version stamp. StoredExpressions always offers every library of the linked apiserver.
var CompatibilityVersion = version.MajorMinor(1, 34)

// Env holds the CEL environments for policy expressions: for each of the NewExpressions and
// StoredExpressions types of k8s.io/apiserver/pkg/cel/environment, one without and one with
// the error variable. An Env is immutable and safe for concurrent use; build it once.
type Env struct {
	withoutError *environment.EnvSet
	withError    *environment.EnvSet
	withNetwork  *environment.EnvSet
}

// NewEnv builds the environments from environment.MustBaseEnvSet(CompatibilityVersion), and a
// third with the network variable for spec.networkConfRules (introduced with that field: a
// manager without it has no such field to compile). It takes tens of milliseconds; use
// Default unless a test needs its own.
func NewEnv() (*Env, error) {
	base := environment.MustBaseEnvSet(CompatibilityVersion)
	namespaceType := plugincel.BuildNamespaceType()
	requestType := buildRequestType()
	pluginType := buildPluginType()
	errorType := buildErrorType()

	common := []cel.EnvOption{
		cel.Variable(VarObject, cel.DynType),
		cel.Variable(VarOldObject, cel.DynType),
		cel.Variable(VarNamespaceObject, namespaceType.CelType()),
		cel.Variable(VarRequest, requestType.CelType()),
		cel.Variable(VarPlugin, pluginType.CelType()),
	}
	withoutError, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        common,
		DeclTypes:         []*apiservercel.DeclType{namespaceType, requestType, pluginType},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, fmt.Errorf("build policy CEL environment: %w", err)
	}
	withError, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        append(common[:len(common):len(common)], cel.Variable(VarError, errorType.CelType())),
		DeclTypes:         []*apiservercel.DeclType{namespaceType, requestType, pluginType, errorType},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, fmt.Errorf("build policy CEL environment with error variable: %w", err)
	}
	networkType := buildNetworkType()
	// Network-conf rules do not see the pod (object, oldObject): its author writes its
	// labels and annotations, and the rules must not rest on them.
	withNetwork, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable(VarNamespaceObject, namespaceType.CelType()),
			cel.Variable(VarRequest, requestType.CelType()),
			cel.Variable(VarPlugin, pluginType.CelType()),
			cel.Variable(VarNetwork, networkType.CelType()),
		},
		DeclTypes: []*apiservercel.DeclType{namespaceType, requestType, pluginType, networkType},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, fmt.Errorf("build policy CEL environment with network variable: %w", err)
	}
	return &Env{withoutError: withoutError, withError: withError, withNetwork: withNetwork}, nil
}

// Default returns the process-wide Env, built on first use.
var Default = sync.OnceValues(NewEnv)

func (e *Env) env(envType environment.Type, kind Kind) (*cel.Env, error) {
	set := e.withoutError
	switch {
	case kind == KindNetworkConfRule:
		set = e.withNetwork
	case kind.withError():
		set = e.withError
	}
	return set.Env(envType)
}

func objectType(name string, fields ...*apiservercel.DeclField) *apiservercel.DeclType {
	m := make(map[string]*apiservercel.DeclField, len(fields))
	for _, f := range fields {
		m[f.Name] = f
	}
	return apiservercel.NewObjectType(name, m)
}

func declField(name string, t *apiservercel.DeclType) *apiservercel.DeclField {
	return apiservercel.NewDeclField(name, t, true, nil, nil)
}

func buildRequestType() *apiservercel.DeclType {
	userInfo := objectType("npp.UserInfo",
		apiservercel.NewDeclField("username", apiservercel.StringType, false, nil, nil),
		apiservercel.NewDeclField("uid", apiservercel.StringType, false, nil, nil),
		apiservercel.NewDeclField("groups", apiservercel.NewListType(apiservercel.StringType, -1), false, nil, nil),
		apiservercel.NewDeclField("extra", apiservercel.NewMapType(apiservercel.StringType, apiservercel.NewListType(apiservercel.StringType, -1), -1), false, nil, nil),
	)
	return objectType("npp.Request",
		declField("operation", apiservercel.StringType),
		declField("userInfo", userInfo),
		declField("dryRun", apiservercel.BoolType),
	)
}

func buildPluginType() *apiservercel.DeclType {
	return objectType("npp.Plugin",
		declField("name", apiservercel.StringType),
		declField("alias", apiservercel.StringType),
		declField("synchronous", apiservercel.BoolType),
	)
}

func buildErrorType() *apiservercel.DeclType {
	return objectType("npp.PluginError",
		declField("type", apiservercel.StringType),
		declField("message", apiservercel.StringType),
		declField("reason", apiservercel.StringType),
	)
}

// maxNetworkListItems is the size the cost estimator assumes for the network variable's
// lists: a generous bound for a network-conf (an annotation), not a limit the plugins enforce.
const maxNetworkListItems = 256

func buildNetworkType() *apiservercel.DeclType {
	strings := apiservercel.NewListType(apiservercel.StringType, maxNetworkListItems)
	port := objectType("npp.Port",
		declField("port", apiservercel.IntType),
		declField("protocol", apiservercel.StringType),
	)
	param := objectType("npp.Parameter",
		declField("name", apiservercel.StringType),
		declField("value", apiservercel.StringType),
	)
	return objectType("npp.Network",
		declField("loadBalancerIDs", strings),
		declField("ports", apiservercel.NewListType(port, maxNetworkListItems)),
		declField("hosts", strings),
		declField("classes", strings),
		declField("createsCloudResources", apiservercel.BoolType),
		declField("parameters", apiservercel.NewListType(param, maxNetworkListItems)),
	)
}
