package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestLiveProviderConfig: explain --live reads the manager's provider configuration from its
// ConfigMap, so the plugins it registers are the manager's (the cloud ones included); no
// ConfigMap means the built-in defaults, as for the manager, with a note; so does a
// ConfigMap without the key.
func TestLiveProviderConfig(t *testing.T) {
	const ns = "network-plugin-policy-system"
	toml := "[alibabacloud]\nenable = true\n[alibabacloud.slb]\nmin_port = 500\nmax_port = 600\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ProviderConfigMapName}, Data: map[string]string{ProviderConfigKey: toml}}
	var errOut bytes.Buffer
	data, source := liveProviderConfig(context.Background(), fake.NewClientset(cm), ns, &errOut)
	if string(data) != toml || source != "ConfigMap "+ns+"/"+ProviderConfigMapName || errOut.Len() != 0 {
		t.Fatalf("got %q from %s (%q)", data, source, errOut.String())
	}
	g := &globalOptions{providerConfigData: data, providerConfigSource: source}
	reg, err := newRegistry(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Get("AlibabaCloud-SLB"); !ok {
		t.Error("AlibabaCloud-SLB is not registered from the manager's ConfigMap")
	}
	if data, _ := liveProviderConfig(context.Background(), fake.NewClientset(), ns, &errOut); data != nil || !strings.Contains(errOut.String(), "the built-in defaults apply") {
		t.Errorf("no ConfigMap: %q (%q), want the defaults with a note", data, errOut.String())
	}
	cm.Data = map[string]string{"other": "x"}
	if data, _ := liveProviderConfig(context.Background(), fake.NewClientset(cm), ns, &errOut); data != nil || !strings.Contains(errOut.String(), "has no key config.toml") {
		t.Errorf("no key: %q (%q), want the defaults with a note", data, errOut.String())
	}
}
