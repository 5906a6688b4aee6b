// Package gameserverset validates OpenKruise Game GameServerSets of the network types this
// manager serves, in place of OKG's own GameServerSet webhook, which the API server skips for
// them (pkg/controller/okgvalidation). It checks what OKG's webhook checks (networkType
// required when spec.network is set, and never changed once set, whichever side is this
// manager's) and what OKG does not: the network-conf, with the plugin's own parameter checks,
// on a pod built from the GameServerSet as OKG builds its pods.
package gameserverset

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// Path is where the manager's webhook server serves this validation.
const Path = "/validate-game-kruise-io-v1alpha1-gameserverset"

// WebhookName is the name of this manager's entry in its ValidatingWebhookConfiguration.
const WebhookName = "vgameserverset.policy.game.kruise.io"

// +kubebuilder:webhook:path=/validate-game-kruise-io-v1alpha1-gameserverset,mutating=false,failurePolicy=fail,sideEffects=None,admissionReviewVersions=v1,groups=game.kruise.io,resources=gameserversets,verbs=create;update,versions=v1alpha1,name=vgameserverset.policy.game.kruise.io,timeoutSeconds=10

// gameServerSet is the part of OKG's GameServerSet (game.kruise.io/v1alpha1) this validation
// reads: spec.network and the template's containers. Other fields are ignored.
type gameServerSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Network *struct {
			NetworkType string             `json:"networkType,omitempty"`
			NetworkConf networkstatus.Conf `json:"networkConf,omitempty"`
		} `json:"network,omitempty"`
		GameServerTemplate struct {
			Spec struct {
				Containers []struct {
					Name string `json:"name"`
				} `json:"containers,omitempty"`
			} `json:"spec,omitempty"`
		} `json:"gameServerTemplate,omitempty"`
	} `json:"spec"`
}

// networkType is spec.network.networkType, "" without spec.network.
func (g *gameServerSet) networkType() string {
	if g.Spec.Network == nil {
		return ""
	}
	return g.Spec.Network.NetworkType
}

// Validator is the admission handler of GameServerSet CREATE and UPDATE.
type Validator struct {
	// Plugins are the registered network plugins. Required.
	Plugins *plugin.Registry
	// Reader reads the objects a plugin's network depends on (plugin.ObjectChecker: an
	// IngressClass, other namespaces' Ingresses), from the manager's cache; what it finds is
	// an admission warning, never a denial. nil skips those checks.
	Reader client.Reader
	// StepBack, when set and true for a GameServerSet's network type (the new or the old
	// one), admits it unchecked: OKG serves the type's provider then, and this manager's
	// condition no longer exempts the type from OKG's entry, so OKG validates it.
	StepBack func(networkType string) (bool, string)
	// Resolver gives the root policies' network-conf rules (spec.networkConfRules) that
	// select the GameServerSet's pods; nil checks none.
	Resolver *policy.Resolver
	// Namespaces reads the GameServerSet's Namespace, for the rules' namespaceSelector and
	// namespaceObject (the manager's cache); nil or a failed read selects every rule
	// policy's namespaceSelector (fail closed).
	Namespaces client.Reader
}

var _ admission.Handler = (*Validator)(nil)

// Handle decodes the request's GameServerSets and returns Validate's answer; a body that does
// not decode is a 400 naming the object.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	var obj, old gameServerSet
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode GameServerSet: %w", err))
	}
	var oldPtr *gameServerSet
	if req.Operation == admissionv1.Update {
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the old GameServerSet: %w", err))
		}
		oldPtr = &old
	}
	if v.StepBack != nil {
		for _, t := range []string{obj.networkType(), old.networkType()} {
			if back, why := v.StepBack(t); back {
				return admission.Allowed("network-plugin-policy steps back, OKG validates: " + why)
			}
		}
	}
	warnings, errs := v.validate(ctx, &obj, oldPtr)
	if len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// validate checks obj (and old, nil on CREATE) and returns the admission warnings and the
// errors, with field paths:
//   - spec.network.networkType is required when spec.network is set (OKG: "network type is
//     required");
//   - on UPDATE, a non-empty networkType never changes while both objects have spec.network
//     (OKG: "change network type is not allowed"), whichever of the two types is this
//     manager's; removing spec.network, or adding it, is OKG's to allow, as it does;
//   - for a type this manager serves, spec.network.networkConf passes the plugin's own checks
//     (plugin.ConfValidator) on the pod OKG would make of ordinal 0: a ParameterError is an
//     error on spec.network.networkConf[i].value of the parameter it names (on
//     spec.network.networkConf when the parameter is missing), a warning-level one an
//     admission warning;
//   - the root policies' network-conf rules that select the pods (Resolver) hold for that
//     pod, as at its admission (an error on the parameter the rules read; an Audit policy's
//     rule a warning only);
//   - what depends on other objects (plugin.ObjectChecker, through Reader) is an admission
//     warning only, since GitOps applies objects in any order.
func (v *Validator) validate(ctx context.Context, obj, old *gameServerSet) ([]string, field.ErrorList) {
	netPath := field.NewPath("spec", "network")
	var errs field.ErrorList
	if obj.Spec.Network != nil && obj.Spec.Network.NetworkType == "" {
		errs = append(errs, field.Required(netPath.Child("networkType"), "network type is required"))
	}
	if old != nil && old.Spec.Network != nil && obj.Spec.Network != nil && old.networkType() != "" && old.networkType() != obj.networkType() {
		errs = append(errs, field.Invalid(netPath.Child("networkType"), obj.networkType(),
			fmt.Sprintf("change network type is not allowed (was %q); create a new GameServerSet instead", old.networkType())))
	}
	if len(errs) > 0 || obj.Spec.Network == nil {
		return nil, errs
	}
	p, ok := v.Plugins.Get(obj.networkType())
	if !ok {
		return nil, nil // not this manager's type: OKG's entry validates it
	}
	pod, err := podOf(obj)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(netPath.Child("networkConf"), err)}
	}
	var confErr error
	if cv, ok := p.(plugin.ConfValidator); ok {
		confErr = cv.ValidateConf(pod)
	}
	failure, warns := plugin.Split(confErr)
	var warnings []string
	for _, w := range warns {
		warnings = append(warnings, fmt.Sprintf("spec.network.networkConf: %s", w))
	}
	if failure != nil {
		if old != nil && old.Spec.Network != nil && old.networkType() == obj.networkType() && slices.Equal(old.Spec.Network.NetworkConf, obj.Spec.Network.NetworkConf) {
			// The network-conf is the one already applied (a GameServerSet from before a rule
			// existed, or OKG's): a write that does not change it is not refused for it.
			return append(warnings, fmt.Sprintf("spec.network.networkConf, unchanged, would be refused if it were new: %s", failure)), errs
		}
		return warnings, append(errs, confError(netPath.Child("networkConf"), obj.Spec.Network.NetworkConf, failure, obj.networkType()))
	}
	ruleWarnings, ruleErr := v.checkRules(ctx, p, pod, obj, old)
	warnings = append(warnings, ruleWarnings...)
	if ruleErr != nil {
		return warnings, append(errs, ruleErr)
	}
	if oc, ok := p.(plugin.ObjectChecker); ok && v.Reader != nil {
		for _, err := range flatten(oc.CheckObjects(ctx, v.Reader, pod)) {
			warnings = append(warnings, fmt.Sprintf("spec.network.networkConf: %s (checked against the cluster as it is now; the pods' admission checks again)", err))
		}
	}
	return warnings, errs
}

// podOf is the pod OKG makes for ordinal 0 of obj, as far as the plugins' parameter checks
// read it: name <gss>-0, label game.kruise.io/owner-gss, the network-type and network-conf
// annotations from spec.network, and the template's container names.
func podOf(obj *gameServerSet) (*corev1.Pod, error) {
	conf, err := networkstatus.EncodeConf(obj.Spec.Network.NetworkConf)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace:   obj.Namespace,
		Labels:      map[string]string{networkstatus.LabelOwnerGSS: obj.Name},
		Annotations: map[string]string{networkstatus.AnnotationNetworkType: obj.networkType(), networkstatus.AnnotationNetworkConf: conf},
	}}
	if obj.Name != "" {
		pod.Name = obj.Name + "-0"
	}
	for _, c := range obj.Spec.GameServerTemplate.Spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c.Name})
	}
	return pod, nil
}

// flatten returns the errors joined in err (errors.Join, nested), or err alone; none for nil.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// confError is the field error of a plugin's ParameterError about conf: Invalid on the value
// of the first entry of the parameter it names, or Required on the list when no entry names
// it (a missing parameter, or one the error does not name).
func confError(path *field.Path, conf networkstatus.Conf, failure *plugin.Error, networkType string) *field.Error {
	msg := fmt.Sprintf("%s (%s)", failure, networkType)
	for i, p := range conf {
		if failure.Param != "" && p.Name == failure.Param {
			return field.Invalid(path.Index(i).Child("value"), p.Value, msg)
		}
	}
	return field.Required(path, msg)
}

// checkRules evaluates the network-conf rules of the root policies that select pod (the pod
// of ordinal 0), as the pod webhook does at CREATE: Enforce rules that do not hold are an
// error on the parameter they read (confError), unless the network-conf is the one already
// applied (an UPDATE that does not change it: a warning, as for the plugin's own checks);
// Audit rules that do not hold are a warning. A network-conf the plugin cannot read is left
// to the plugin's checks.
func (v *Validator) checkRules(ctx context.Context, p plugin.Plugin, pod *corev1.Pod, obj, old *gameServerSet) ([]string, *field.Error) {
	if v.Resolver == nil {
		return nil, nil
	}
	in := policy.Input{Pod: pod, Request: policy.RequestInfo{Operation: string(admissionv1.Create)},
		Plugin: policy.Plugin{Name: p.Name(), Alias: p.Alias(), Synchronous: p.IsSynchronous()}}
	ns := &corev1.Namespace{}
	if v.Namespaces == nil || v.Namespaces.Get(ctx, client.ObjectKey{Name: obj.Namespace}, ns) != nil {
		in.NamespaceUnknown = true
	} else {
		in.Namespace = ns
	}
	res, err := v.Resolver.Begin(ctx, in)
	if err != nil || !res.HasNetworkConfRules() {
		return nil, nil
	}
	network, params, err := podwebhook.NetworkOf(p, pod)
	if err != nil {
		return nil, nil
	}
	violations := res.CheckNetworkConf(ctx, network)
	var warnings []string
	for _, viol := range violations {
		if viol.Audit {
			warnings = append(warnings, "spec.network.networkConf would be refused (Audit): "+viol.String())
		}
	}
	perr := podwebhook.RuleError(violations, params)
	if perr == nil {
		return warnings, nil
	}
	if old != nil && old.Spec.Network != nil && old.networkType() == obj.networkType() && slices.Equal(old.Spec.Network.NetworkConf, obj.Spec.Network.NetworkConf) {
		return append(warnings, fmt.Sprintf("spec.network.networkConf, unchanged, would be refused if it were new: %s", perr)), nil
	}
	// The first parameter the rules read names the field.
	first := *perr
	first.Param, _, _ = strings.Cut(perr.Param, ",")
	return warnings, confError(field.NewPath("spec", "network", "networkConf"), obj.Spec.Network.NetworkConf, &first, obj.networkType())
}
