package cluster

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// WaitForDefaultServiceAccount waits, up to a minute, until namespace ns has its default
// ServiceAccount: the API server refuses pods of a namespace before the ServiceAccount
// controller has made it, which lags while the cluster is loaded. Errors: the wait timed out
// or ctx ended.
func WaitForDefaultServiceAccount(ctx context.Context, cs kubernetes.Interface, ns string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("default ServiceAccount of %s: %w", ns, err)
	}
	return nil
}
