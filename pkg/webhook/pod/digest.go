package pod

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// AnnotationStatusDigest records which game.kruise.io/network-status the manager last wrote
// on the pod: "sha256:<32 hex digits>", the first 128 bits of the SHA-256 of the
// annotation's exact bytes (crypto/sha256), so that no other status can be made to match a
// stored digest. The webhook writes it whenever a plugin ran (CREATE, UPDATE) and removes it
// with the status. It is one of the manager's own annotations (OwnedAnnotationPrefix), put
// back when anyone else changes it.
//
// A network-status is anyone's to write (an annotation): a pod author's edit made while no
// replica answered, a status written through pods/status, a pod OKG admitted or one of an
// earlier release of this manager. The network controller opens the readiness gate only on
// a Ready network-status that matches this digest (WroteStatus); on any other it asks for a
// plugin run, which checks the objects the status describes, and leaves a gate that is
// already True as it is.
const AnnotationStatusDigest = OwnedAnnotationPrefix + "network-status-digest"

// StatusDigest returns the AnnotationStatusDigest value for a network-status annotation value.
func StatusDigest(status string) string {
	sum := sha256.Sum256([]byte(status))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// WroteStatus reports whether pod's network-status is the one the manager last wrote: it has
// one and AnnotationStatusDigest matches its bytes.
func WroteStatus(pod *corev1.Pod) bool {
	st, ok := pod.Annotations[networkstatus.AnnotationNetworkStatus]
	return ok && pod.Annotations[AnnotationStatusDigest] == StatusDigest(st)
}

// setStatusDigest records mutated's network-status as written by the manager: it sets
// AnnotationStatusDigest to its digest, or removes it when there is no status.
func setStatusDigest(mutated *corev1.Pod) {
	st, ok := mutated.Annotations[networkstatus.AnnotationNetworkStatus]
	if !ok {
		delete(mutated.Annotations, AnnotationStatusDigest)
		return
	}
	if mutated.Annotations == nil {
		mutated.Annotations = map[string]string{}
	}
	mutated.Annotations[AnnotationStatusDigest] = StatusDigest(st)
}
