package main

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ownUsername asks the apiserver who the manager is (a SelfSubjectReview, which every
// authenticated user may create; authentication.k8s.io/v1 since Kubernetes 1.28): the
// username its requests carry, system:serviceaccount:<namespace>:<name> as deployed. The pod
// webhook keeps a change of the manager's own pod annotations only from that user, so the
// answer must come from the apiserver and not from a flag that could disagree with the
// credentials. An error (the apiserver unreachable, a review refused) stops the start-up.
func ownUsername(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("client for the self subject review: %w", err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the apiserver for the manager's own username (SelfSubjectReview): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("the apiserver's SelfSubjectReview names no user for the manager's credentials")
	}
	return review.Status.UserInfo.Username, nil
}
