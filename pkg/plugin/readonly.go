package plugin

import (
	"context"
	"errors"
)

// ErrWouldWrite is what a plugin run under ReadOnly returns when it would write somewhere
// (the API server, a ledger, its own allocator's holds): only a real run can tell how it ends.
var ErrWouldWrite = errors.New("the plugin run would write")

// readOnlyKey marks a context of ReadOnly.
type readOnlyKey struct{}

// ReadOnly returns ctx for a plugin run that must write nothing and change nothing another
// run could see (the network controller's precheck, pkg/webhook/pod.Precheck): the client it
// gets refuses writes, and a plugin that writes elsewhere (a load-balancer plugin's port
// ledger and allocator) asks IsReadOnly and returns ErrWouldWrite instead.
func ReadOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, readOnlyKey{}, true)
}

// IsReadOnly reports whether ctx is ReadOnly's.
func IsReadOnly(ctx context.Context) bool { v, _ := ctx.Value(readOnlyKey{}).(bool); return v }
