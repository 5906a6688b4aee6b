package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/okg-extensions/network-plugin-policy/pkg/apicompat"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// checkAPIServer returns an error when the API server cannot honour the pod webhook's
// matchConditions: a version older than apicompat.MinServerVersion, or the
// MutatingWebhookConfiguration mutatingName stored without the matchConditions of its two
// pod entries (when it exists). The manager then registers no webhook, injects no CA and
// runs no controller, and /readyz reports the error.
func checkAPIServer(ctx context.Context, cfg *rest.Config, mutatingName string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create a client for the compatibility check: %w", err)
	}
	if err := apicompat.CheckServerVersion(cs.Discovery()); err != nil {
		return err
	}
	stored, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutatingName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read MutatingWebhookConfiguration %s for the compatibility check: %w", mutatingName, err)
	}
	return apicompat.CheckMatchConditions(stored, podwebhook.SyncWebhookName, podwebhook.AsyncWebhookName)
}
