package main

import (
	"strings"
	"testing"
	"time"
)

// TestRetryOptionsValidate: the retry flags need at least one worker and an interval floor of
// at least 1s, with an error naming the flag.
func TestRetryOptionsValidate(t *testing.T) {
	cases := map[string]struct {
		o    retryOptions
		want string
	}{
		"defaults":         {o: retryOptions{maxConcurrentReconciles: 10, minInterval: time.Second, maxRecreatesPerMinute: 10, stateRefresh: 10 * time.Minute}},
		"longer floor":     {o: retryOptions{maxConcurrentReconciles: 1, minInterval: time.Minute, maxRecreatesPerMinute: 1, stateRefresh: time.Minute}},
		"no worker":        {o: retryOptions{maxConcurrentReconciles: 0, minInterval: time.Second, maxRecreatesPerMinute: 10, stateRefresh: 10 * time.Minute}, want: "--max-concurrent-reconciles: want at least 1, got 0"},
		"sub-second floor": {o: retryOptions{maxConcurrentReconciles: 10, minInterval: 500 * time.Millisecond, maxRecreatesPerMinute: 10, stateRefresh: 10 * time.Minute}, want: "--min-retry-interval: want at least 1s"},
		"short refresh":    {o: retryOptions{maxConcurrentReconciles: 10, minInterval: time.Second, maxRecreatesPerMinute: 10, stateRefresh: 30 * time.Second}, want: "--retry-state-refresh: want at least 1m, got 30s"},
		"no Recreate":      {o: retryOptions{maxConcurrentReconciles: 10, minInterval: time.Second, stateRefresh: time.Minute}, want: "--max-recreates-per-namespace-per-minute: want at least 1, got 0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.o.validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
