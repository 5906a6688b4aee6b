package plugin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestResultError pins how Run classifies a plugin's error, in particular a plugin that
// returns its context's deadline error at the instant Run's deadline fires (a race that
// used to give an internalError now and then).
func TestResultError(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	live := context.Background()
	cases := map[string]struct {
		ctx  context.Context
		err  error
		want ErrorType
	}{
		"nil":                                 {ctx: live, err: nil, want: ""},
		"untyped error":                       {ctx: live, err: errors.New("boom"), want: InternalError},
		"typed error kept":                    {ctx: expired, err: Errorf(APICallError, "get node: %v", context.DeadlineExceeded), want: APICallError},
		"ctx.Err() after the deadline":        {ctx: expired, err: context.DeadlineExceeded, want: Timeout},
		"wrapped deadline after the deadline": {ctx: expired, err: fmt.Errorf("list pods: %w", context.DeadlineExceeded), want: Timeout},
		"a deadline of the plugin's own":      {ctx: live, err: context.DeadlineExceeded, want: InternalError},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := resultError(tc.ctx, tc.err, "P", OperationCreate, time.Second)
			if got := TypeOf(err); got != tc.want {
				t.Errorf("resultError(%v) = %v of type %q, want %q", tc.err, err, got, tc.want)
			}
		})
	}
}
