package main

import (
	"context"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// apiWarnings is the rest.WarningHandlerWithContext of the manager's clients. It logs the
// API server's warnings (HTTP code 299) as controller-runtime's default does
// (log.NewKubeAPIWarningLogger: at info, with the request's logger), except the pod
// webhook's own warnings about a plugin's run (podwebhook.WarningPrefix), which come back
// on every trigger stamp of the network controller: the webhook replica that ran the plugin
// logged that failure already, so here they are logged at V(1).
type apiWarnings struct {
	inner rest.WarningHandlerWithContext
}

// newAPIWarnings returns an apiWarnings over controller-runtime's default warning logger.
func newAPIWarnings() apiWarnings {
	return apiWarnings{inner: log.NewKubeAPIWarningLogger(log.KubeAPIWarningLoggerOptions{})}
}

// HandleWarningHeaderWithContext logs one warning (see apiWarnings).
func (w apiWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if code == 299 && strings.HasPrefix(text, podwebhook.WarningPrefix) {
		log.FromContext(ctx).V(1).Info("Warning from the pod webhook", "warning", text)
		return
	}
	w.inner.HandleWarningHeaderWithContext(ctx, code, agent, text)
}
