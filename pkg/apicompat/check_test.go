package apicompat

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestCheckServerVersion: against a fake discovery response, 1.30 and later pass; 1.29, 1.27
// and an unstamped build are refused with a message naming the version and the minimum.
func TestCheckServerVersion(t *testing.T) {
	cases := map[string]struct {
		gitVersion string
		wantErr    string
	}{
		"1.37":                {gitVersion: "v1.37.2"},
		"1.30, the oldest":    {gitVersion: "v1.30.0"},
		"a distribution's":    {gitVersion: "v1.31.4-eks-2d98532"},
		"1.29":                {gitVersion: "v1.29.9", wantErr: "the API server is Kubernetes v1.29.9; network-plugin-policy needs 1.30 or later"},
		"1.27, no conditions": {gitVersion: "v1.27.3", wantErr: "needs 1.30 or later"},
		"unstamped build":     {gitVersion: "v0.0.0-master+$Format:%H$", wantErr: "needs 1.30 or later"},
		"garbage":             {gitVersion: "latest", wantErr: `parse the API server's version "latest"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: tc.gitVersion}}
			err := CheckServerVersion(d)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("CheckServerVersion(%s) = %v, want nil", tc.gitVersion, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckServerVersion(%s) = %v, want an error containing %q", tc.gitVersion, err, tc.wantErr)
			}
		})
	}
}

// TestCheckMatchConditions: an entry stored without matchConditions (the API server dropped
// them) or missing is refused; entries that kept them pass.
func TestCheckMatchConditions(t *testing.T) {
	entry := func(name string, conditions int) admissionregistrationv1.MutatingWebhook {
		w := admissionregistrationv1.MutatingWebhook{Name: name}
		for range conditions {
			w.MatchConditions = append(w.MatchConditions, admissionregistrationv1.MatchCondition{Name: "c", Expression: "true"})
		}
		return w
	}
	cfg := func(ws ...admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.MutatingWebhookConfiguration {
		c := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: ws}
		c.Name = "npp"
		return c
	}
	cases := map[string]struct {
		cfg     *admissionregistrationv1.MutatingWebhookConfiguration
		wantErr string
	}{
		"both kept":          {cfg: cfg(entry("sync", 2), entry("async", 2))},
		"sync dropped":       {cfg: cfg(entry("sync", 0), entry("async", 2)), wantErr: "entry sync of MutatingWebhookConfiguration npp is stored without matchConditions"},
		"async entry absent": {cfg: cfg(entry("sync", 2)), wantErr: "has no entry async"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckMatchConditions(tc.cfg, "sync", "async")
			if tc.wantErr == "" && err != nil {
				t.Fatalf("CheckMatchConditions = %v, want nil", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckMatchConditions = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
