package lb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// EventServiceIndex is the field index of the manager's Event cache by the UID of the Service
// an Event is about (involvedObject.uid, for involvedObject.kind Service), through which the
// plugin finds what the cloud controller said about a Service.
const EventServiceIndex = "involvedObject.serviceUID"

// EventSelector is the field selector of the manager's Event informer: the Warning Events of
// Services, the ones a cloud controller records when it cannot provision a load balancer
// (Kubernetes' service controller: reason SyncLoadBalancerFailed; a provider's own
// controller: its own reasons). Only those are cached, so the cache holds a few Events per
// failing Service, not every Event of the cluster.
var EventSelector = fields.SelectorFromSet(fields.Set{"involvedObject.kind": "Service", "type": corev1.EventTypeWarning})

// RegisterIndexes adds EventServiceIndex to indexer. Errors are the indexer's.
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Event{}, EventServiceIndex, EventServiceUID); err != nil {
		return fmt.Errorf("index Events by Service: %w", err)
	}
	return nil
}

// EventServiceUID is EventServiceIndex's value of obj: the UID of the Service an Event is
// about, none for an Event about anything else (a client.IndexerFunc).
func EventServiceUID(obj client.Object) []string {
	e, ok := obj.(*corev1.Event)
	if !ok || e.InvolvedObject.Kind != "Service" || e.InvolvedObject.UID == "" {
		return nil
	}
	return []string{string(e.InvolvedObject.UID)}
}

// eventTime is when an Event was last seen: its series' last observation, its
// lastTimestamp, its eventTime or its creation, the first that is set.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// cloudReasons are the Warning reasons of Kubernetes' service controller
// (k8s.io/cloud-provider/controllers/service), which every cloud controller manager runs, about
// a load balancer it could not provision.
var cloudReasons = []string{"SyncLoadBalancerFailed", "UpdateLoadBalancerFailed", "LoadBalancerUpdateFailed", "DeleteLoadBalancerFailed"}

// fromCloud reports whether e is a cloud controller's word about the Service's load balancer:
// one of cloudReasons, or any reason from a reporter named like a cloud controller
// ("service-controller", "...cloud-controller-manager", "...-ccm"); Warnings of other
// controllers (an EndpointSlice controller's, say) are not the cloud's.
func fromCloud(e *corev1.Event) bool {
	if slices.Contains(cloudReasons, e.Reason) {
		return true
	}
	for _, by := range []string{e.ReportingController, e.Source.Component} {
		if by == "service-controller" || strings.HasSuffix(by, "cloud-controller-manager") || strings.HasSuffix(by, "-ccm") {
			return true
		}
	}
	return false
}

// CloudFailure returns what the cloud controller last said against svc, a Service still
// without a load-balancer address: a CloudError with the newest Warning Event's reason,
// reporter and message, or nil when there is none (the cloud has not answered yet). It
// reads the manager's Event cache through EventServiceIndex, and only Events fromCloud; a
// failed read is nil too (the network is waiting either way, and the next run reads again).
func CloudFailure(ctx context.Context, c client.Reader, svc *corev1.Service) error {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(svc.Namespace), client.MatchingFields{EventServiceIndex: string(svc.UID)}); err != nil {
		return nil
	}
	var newest *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if e.Type != corev1.EventTypeWarning || !fromCloud(e) {
			continue
		}
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return nil
	}
	by := newest.ReportingController
	if by == "" {
		by = newest.Source.Component
	}
	return plugin.Errorf(plugin.CloudError, "the cloud controller (%s) reports %s on Service %s/%s: %s", by, newest.Reason, svc.Namespace, svc.Name, newest.Message)
}
