package pod

import (
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// protectResults returns the pod the webhook works from when p reads results another
// controller writes (plugin.ResultReader): the request's pod with those annotations as the
// stored pod has them, unless the request is a writer p trusts, and the keys it put back,
// sorted. p that is no ResultReader, or a trusted user, leaves pod as it is.
//
//   - CREATE, or an UPDATE that changes the network type (old's type differs): every result
//     annotation is dropped. A new pod has no controller's answer yet; one its author wrote
//     would publish another server's address as this game server's and open its readiness
//     gate; and one written while the pod had another type was not checked.
//   - any other UPDATE: a result annotation that is added, changed or removed is reset to
//     its value in the stored pod (old), or removed when old has none.
//
// pod is not modified; the result is pod itself when nothing differs.
func protectResults(pod, old *corev1.Pod, op plugin.Operation, p plugin.Plugin, user authenticationv1.UserInfo) (*corev1.Pod, []string) {
	rr, ok := p.(plugin.ResultReader)
	if !ok || (op != plugin.OperationCreate && op != plugin.OperationUpdate) {
		return pod, nil
	}
	keys := rr.ResultAnnotations()
	var was map[string]string
	if op == plugin.OperationUpdate && old != nil &&
		old.Annotations[networkstatus.AnnotationNetworkType] == pod.Annotations[networkstatus.AnnotationNetworkType] {
		was = old.Annotations
	}
	var changed []string
	for _, k := range keys {
		v, has := pod.Annotations[k]
		w, had := was[k]
		if has != had || v != w {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 || rr.TrustsResultWriter(user) {
		return pod, nil
	}
	slices.Sort(changed)
	return restoreAnnotations(pod, was, changed), changed
}

// resultsWarning is the admission warning for the result annotations protectResults put
// back: "annotations <keys> are written by the network controller of <type> only (the
// provider configuration's result_writers, result_writer_groups): dropped|reverted".
func resultsWarning(networkType string, op plugin.Operation, keys []string) string {
	what := "reverted to the stored value"
	if op == plugin.OperationCreate {
		what = "dropped"
	}
	return "annotations " + strings.Join(keys, ", ") + " are written by the network controller of " + networkType +
		" only (the provider configuration's result_writers, result_writer_groups): " + what
}
