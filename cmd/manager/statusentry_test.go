package main

import (
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/webhookconfig"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// TestStatusEntrySeesEveryResultAnnotation: the pods/status entry of
// config/webhook/mutating_patch.yaml (static: the webhook configuration controller does not
// write it) sends the webhook every status UPDATE that changes a result annotation of any
// plugin this manager has (plugin.ResultReader), so that a result written through
// pods/status by anyone but its controller is put back, as one written through the pod is.
func TestStatusEntrySeesEveryResultAnnotation(t *testing.T) {
	cfg, err := plugin.ParseConfig([]byte(everyProvider))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range providerPlugins(cfg) {
		if rr, ok := p.(plugin.ResultReader); ok {
			keys = append(keys, rr.ResultAnnotations()...)
		}
	}
	if len(keys) == 0 {
		t.Fatal("no plugin reads a result annotation")
	}
	want := []admissionregistrationv1.MatchCondition{{Name: webhookconfig.ConditionChangesGuarded, Expression: webhookconfig.StatusCondition(keys)}}
	raw, err := os.ReadFile("../../config/webhook/mutating_patch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfgs admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &cfgs); err != nil {
		t.Fatal(err)
	}
	for _, w := range cfgs.Webhooks {
		if w.Name != podwebhook.StatusWebhookName {
			continue
		}
		if len(w.MatchConditions) != 1 || w.MatchConditions[0] != want[0] {
			out, _ := yaml.Marshal(want)
			t.Errorf("matchConditions of %s: %+v, want\n%s", w.Name, w.MatchConditions, out)
		}
		return
	}
	t.Errorf("no entry %s", podwebhook.StatusWebhookName)
}
