package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// ErrorType is the category of a plugin error. The values are OKG's
// (cloudprovider/errors) plus Timeout, which this project adds; they are the strings
// that policies' CEL expressions see as error.type.
type ErrorType string

const (
	// APICallError: a call to the Kubernetes API server failed (OKG "apiCallError").
	APICallError ErrorType = "apiCallError"
	// InternalError: a bug or an unexpected state inside the plugin, including a
	// recovered panic (OKG "internalError").
	InternalError ErrorType = "internalError"
	// ParameterError: the pod's network-type, network-conf or network-status is not
	// usable as written (OKG "parameterError").
	ParameterError ErrorType = "parameterError"
	// NotImplementedError: the plugin does not implement the operation (OKG
	// "notImplementedError").
	NotImplementedError ErrorType = "notImplementedError"
	// RetryError: the plugin could not finish now but may succeed later, for example
	// an exhausted host-port range (OKG "retryError").
	RetryError ErrorType = "retryError"
	// Timeout: the plugin ran past the deadline that Run gave it (this project).
	Timeout ErrorType = "timeout"
	// CloudError: the plugin's objects are written and the provider's cloud controller
	// refuses them, as a Warning Event on the object says (a load-balancer Service without an
	// address whose cloud controller reports SyncLoadBalancerFailed: a listener quota, a rate
	// limit, an unknown load balancer id). This project's; OKG reports no error there.
	CloudError ErrorType = "cloudError"
)

// Error is the error every plugin operation returns. Callers branch on it with
// errors.As:
//
//	var perr *plugin.Error
//	if errors.As(err, &perr) && perr.Type == plugin.ParameterError { ... }
//
// Message is meant for the user who wrote the pod (admission message, event); it never
// contains a stack trace.
type Error struct {
	// Type is the category, one of the ErrorType constants.
	Type ErrorType
	// Param names the network-conf parameter or the annotation at fault, for example
	// "ContainerPorts" or "game.kruise.io/network-conf"; empty when no single
	// parameter is at fault.
	Param string
	// Message says what is wrong and, for parameter errors, the expected form.
	Message string
	// Warning marks a finding that did not stop the plugin (for example an unknown
	// network-conf parameter that OKG would ignore): the plugin did its work and returned
	// its pod, status and all, together with this error. The webhook admits such a pod with
	// an admission warning carrying Param and Message, keeps the plugin's pod, and does not
	// consult the policy's failure mode (only errors do). See Split for returning several
	// warnings, or warnings alongside an error.
	Warning bool
	// Notable marks a Warning that the webhook records as a NetworkPluginWarning Event at
	// any admission, not only at those that change the network's inputs: something outside
	// the pod keeps undoing the plugin's work (a Service field rewritten again after each
	// repair), which whoever owns that other writer must hear of.
	Notable bool
	// Unknown marks a failure to observe the network, not an observation that it is wrong:
	// a read the plugin needs failed (an API error, a throttled or timed-out request, a
	// cache that has not synced, a Forbidden), so the plugin cannot tell whether the
	// network is still what the pod's network-status says. A failed write after the plugin
	// saw its object missing or different is not Unknown: the network is then observably
	// broken. The webhook keeps a Ready network as it was on an Unknown failure at UPDATE
	// (see IsUnknown). Errors made by WrapUnknown set it.
	Unknown bool
	// WriteRefused marks a write to an object that exists, that this manager made and that
	// the plugin meant to bring up to date (a patch of the pod's Service or Ingress), which
	// the API server did not accept: throttled (429), failed (5xx), timed out, or refused by
	// another admission controller (a ValidatingAdmissionPolicy, a webhook, a ResourceQuota).
	// The object is still there as it was, so a network that was Ready stays Ready (see
	// KeepsReady); whether a retry window pauses is Inconclusive's separate rule. A failed
	// create (the object is missing) is never WriteRefused. Errors made by WrapWriteRefused set
	// it.
	WriteRefused bool
	// FromCache marks a failure the plugin predicted from the manager's informer caches
	// rather than heard from the API server: a Service create that the namespace's cached
	// ResourceQuotas cannot fit, refused without sending it. It counts toward a retry window
	// as the API server's own refusal would, but a window never closes on it: the network
	// controller has one more attempt made first, and the plugin predicts a refusal only
	// while the API server itself refused the same way recently (see the NodePort plugin).
	FromCache bool
	// Reason is the failure's class within its type (ReasonOf gives the default when it is
	// empty): the CEL error.reason.
	Reason Reason
	// Err is the underlying cause, if any; it is reachable through errors.Unwrap.
	Err error
}

// IsUnknown reports whether the failure says nothing about the network's state: Unknown
// is set, or the plugin ran past its deadline (Timeout: it did not finish looking).
func (e *Error) IsUnknown() bool {
	return e != nil && (e.Unknown || e.Type == Timeout)
}

// KeepsReady reports whether the failure leaves a Ready network as it was: it IsUnknown
// (nothing was observed), or a write to objects that still exist was not accepted
// (WriteRefused, whatever the reason). The webhook keeps the network-status, the
// readiness-gate condition and the objects of a pod whose stored network is Ready on such a
// failure at an UPDATE that leaves the network's inputs alone, warns, and has the check
// repeated; no retry window starts.
func (e *Error) KeepsReady() bool {
	return e != nil && (e.IsUnknown() || e.WriteRefused)
}

// Inconclusive reports whether the failure leaves open whether the plugin can do its work:
// it IsUnknown, or its cause is a failure of the API server, or of the way to it, that says
// nothing about the request itself (Transient). A retry window does not count the time
// before an inconclusive attempt (pkg/networkretry's paused).
func (e *Error) Inconclusive() bool {
	return e != nil && (e.IsUnknown() || Transient(e.Err))
}

// Transient reports whether err is, or wraps, a failure of the API server or of the
// connection to it rather than an answer to the request: HTTP 500, 503, 504 or 429 (an
// internal error, unavailable, a server timeout, throttling), a client timeout or a
// cancelled context, or a refused, reset or cut connection. A definite refusal (Forbidden,
// for example an exceeded quota; Invalid; Conflict) is not transient.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err), apierrors.IsUnexpectedServerError(err):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// WrapUnknown returns an APICallError with Unknown set whose cause is err, described by a
// formatted message ("get node \"n1\"", say): a read the plugin needs failed. It returns nil
// when err is nil.
func WrapUnknown(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Type: APICallError, Message: fmt.Sprintf(format, args...), Err: err, Unknown: true}
}

// WrapWriteRefused returns an APICallError with WriteRefused set whose cause is err,
// described by a formatted message ("create or patch Service \"ns/name\"", say): a write to
// an existing object the plugin manages was not accepted. It is Inconclusive when err is
// Transient, so a throttled or failed write pauses a retry window as a failed read does; a
// definite refusal (Forbidden, Invalid) is not, and counts toward the window. It returns
// nil when err is nil.
func WrapWriteRefused(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Type: APICallError, Message: fmt.Sprintf(format, args...), Err: err, WriteRefused: true}
}

// Error returns "<type>: <message>", with "parameter <param>: " before the message
// when Param is set, and ": <cause>" after it when Err is set.
func (e *Error) Error() string {
	s := string(e.Type) + ": "
	if e.Param != "" {
		s += "parameter " + e.Param + ": "
	}
	s += e.Message
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying cause, or nil.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of type t with a formatted message.
func Errorf(t ErrorType, format string, args ...any) *Error {
	return &Error{Type: t, Message: fmt.Sprintf(format, args...)}
}

// ParamErrorf returns a ParameterError naming param, with a formatted message that
// should state the expected form.
func ParamErrorf(param, format string, args ...any) *Error {
	return &Error{Type: ParameterError, Param: param, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error of type t whose cause is err, described by a formatted
// message ("get service \"ns/name\"", say). It returns nil when err is nil.
func Wrap(t ErrorType, err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Type: t, Message: fmt.Sprintf(format, args...), Err: err}
}

// TypeOf returns the category of err: the Type of the first *Error in its chain,
// InternalError for any other non-nil error, and "" for nil.
func TypeOf(err error) ErrorType {
	if err == nil {
		return ""
	}
	var perr *Error
	if errors.As(err, &perr) {
		return perr.Type
	}
	return InternalError
}

// IsWarning reports whether err carries warnings only: it is not nil and Split finds no
// failure in it (a single *Error with Warning set, or several joined).
func IsWarning(err error) bool {
	failure, _ := Split(err)
	return err != nil && failure == nil
}

// Split separates what a plugin returned into the failure, which the policy's failure mode
// decides, and the warnings, which only become admission warnings. A plugin returns:
//   - a warning: an *Error with Warning set (as before Split existed);
//   - several warnings, or warnings alongside a failure: the *Errors joined with
//     errors.Join, for example errors.Join(plugin.ParamErrorf(...), &plugin.Error{Warning:
//     true, ...}); joins may nest.
//
// Split walks the joins: each *Error with Warning set is a warning, in order; the first
// other *Error is the failure (the others are dropped: one failure decides); an error of
// another type counts as AsError makes it: the first *Error in its chain, or an
// InternalError (so wrap a join in fmt.Errorf only when it holds a single *Error).
// It returns nil, nil for nil.
func Split(err error) (failure *Error, warnings []*Error) {
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		perr := AsError(err)
		switch {
		case perr.Warning:
			warnings = append(warnings, perr)
		case failure == nil:
			failure = perr
		}
	}
	walk(err)
	return failure, warnings
}

// AsError returns err as an *Error: the first *Error in its chain, or a new
// InternalError wrapping err. It returns nil when err is nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var perr *Error
	if errors.As(err, &perr) {
		return perr
	}
	return &Error{Type: InternalError, Message: "plugin failed", Err: err}
}
