package plugin

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Reason is a failure's class within its type that a policy can test without parsing
// messages: the CEL error.reason (failureModeExpression, retry.windowExpression), stored in
// the retry state beside the type. The values are this project's, defined once for every
// plugin family (docs/policy.md, "Error reasons").
type Reason string

const (
	// ReasonInvalidParameter: the network-conf (or network-type) is not what the plugin
	// reads; the default of a ParameterError.
	ReasonInvalidParameter Reason = "InvalidParameter"
	// ReasonNotAllowed: the network-conf asks for something the platform's rules refuse: a
	// root policy's network-conf rule, an annotation the plugin writes itself, a cloud
	// resource the provider configuration does not let pods create, a cap
	// (max_ports_per_pod).
	ReasonNotAllowed Reason = "NotAllowed"
	// ReasonPortsExhausted: no free port where the network-conf asks: no named load
	// balancer has enough free listener ports, or the host-port range is full, or a
	// namespace holds its cap of ports for pods not created yet.
	ReasonPortsExhausted Reason = "PortsExhausted"
	// ReasonQuotaExceeded: a quota refused an object the plugin makes (a ResourceQuota of
	// the namespace, predicted from the cache or answered by the API server).
	ReasonQuotaExceeded Reason = "QuotaExceeded"
	// ReasonCloudRefused: the provider's cloud controller reports a failure on the plugin's
	// object (every CloudError: a listener quota, an unknown load balancer id, a rate limit).
	ReasonCloudRefused Reason = "CloudRefused"
	// ReasonWriteRefused: a write to an object the plugin made, which still exists, was
	// refused (Error.WriteRefused: Invalid, or refused by another admission controller); a
	// throttled or failed one is ReasonUnavailable, one a quota refused ReasonQuotaExceeded.
	ReasonWriteRefused Reason = "WriteRefused"
	// ReasonUnavailable: the API server, or the way to it, failed rather than answered, or
	// the plugin ran out of time (an inconclusive failure: Error.Inconclusive).
	ReasonUnavailable Reason = "Unavailable"
	// ReasonOther: none of the above.
	ReasonOther Reason = "Other"
)

// Reasons are every Reason, in the order docs/policy.md lists them.
var Reasons = []Reason{ReasonInvalidParameter, ReasonNotAllowed, ReasonPortsExhausted, ReasonQuotaExceeded,
	ReasonCloudRefused, ReasonWriteRefused, ReasonUnavailable, ReasonOther}

// ReasonOf returns e's reason: the one the plugin set (Error.Reason), else the first of these
// its type and cause imply, in this order: ReasonCloudRefused for a CloudError;
// ReasonUnavailable for an inconclusive failure (Error.Inconclusive: a throttled or failed
// write too); ReasonQuotaExceeded for a cause the API server refused for a quota (Forbidden,
// "exceeded quota"); ReasonWriteRefused for another refused write; ReasonInvalidParameter
// for a ParameterError; ReasonOther for the rest. "" for nil.
func (e *Error) ReasonOf() Reason {
	switch {
	case e == nil:
		return ""
	case e.Reason != "":
		return e.Reason
	case e.Type == CloudError:
		return ReasonCloudRefused
	case e.Inconclusive():
		return ReasonUnavailable
	case e.Err != nil && apierrors.IsForbidden(e.Err) && strings.Contains(e.Err.Error(), "exceeded quota"):
		return ReasonQuotaExceeded
	case e.WriteRefused:
		return ReasonWriteRefused
	case e.Type == ParameterError:
		return ReasonInvalidParameter
	}
	return ReasonOther
}

// NotAllowedf returns a ParameterError naming param, of reason ReasonNotAllowed: the
// platform's rules refuse what the network-conf asks.
func NotAllowedf(param, format string, args ...any) *Error {
	e := ParamErrorf(param, format, args...)
	e.Reason = ReasonNotAllowed
	return e
}
