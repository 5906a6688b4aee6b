package network

import (
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// maxNoteBytes is the apiserver's limit on an Event's note (events.k8s.io/v1) or message
// (core/v1): NoteLengthLimit in k8s.io/kubernetes/pkg/apis/core/validation.
const maxNoteBytes = 1024

// eventf records an event on pod with the note format/args, cut to maxNoteBytes on a rune
// boundary so that a long plugin error cannot get the event rejected.
func (r *Reconciler) eventf(pod *corev1.Pod, eventType, reason, action, format string, args ...any) {
	r.recorder.Eventf(pod, nil, eventType, reason, action, "%s", truncate(fmt.Sprintf(format, args...), maxNoteBytes))
}

// truncate returns s cut to at most n bytes without splitting a UTF-8 sequence, ending in
// "..." when it was cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
