package networkretry

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// UnverifiedAnnotation is the pod annotation that holds the time since which the plugin could
// not check a Ready network (an Unknown failure at UPDATE): RFC 3339, second precision, UTC.
const UnverifiedAnnotation = policyv1alpha1.AnnotationNetworkUnverified

// UnverifiedSince returns the time in the pod's UnverifiedAnnotation and true, or false when
// the pod has none, or one that does not parse as RFC 3339 or lies more than MaxClockSkew
// after now (the manager never writes such a value; the webhook replaces it at the next
// Unknown failure).
func UnverifiedSince(pod *corev1.Pod, now time.Time) (time.Time, bool) {
	v, ok := pod.Annotations[UnverifiedAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil || t.After(now.Add(MaxClockSkew)) {
		return time.Time{}, false
	}
	return t, true
}

// FormatUnverified is the value of UnverifiedAnnotation for since.
func FormatUnverified(since time.Time) string {
	return since.UTC().Truncate(time.Second).Format(time.RFC3339)
}
