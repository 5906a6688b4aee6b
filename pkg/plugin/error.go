package plugin

import (
	"errors"
	"fmt"
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
	// network-conf parameter): the plugin returned its mutated pod together with this
	// error, and the policy decides whether to admit with a warning or to deny.
	Warning bool
	// Err is the underlying cause, if any; it is reachable through errors.Unwrap.
	Err error
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

// IsWarning reports whether err is (or wraps) an *Error flagged as a warning.
func IsWarning(err error) bool {
	var perr *Error
	return errors.As(err, &perr) && perr.Warning
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
