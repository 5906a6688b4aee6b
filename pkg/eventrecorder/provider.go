package eventrecorder

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
)

// Provider hands out the manager's event recorders: client-go's events library
// (events.NewBroadcaster) writing through a StableNameSink, each recorder wrapped in
// WithoutResourceVersion. It stands in for the manager's GetEventRecorder, whose
// broadcaster's sink cannot be chosen.
type Provider struct {
	broadcaster events.EventBroadcaster
	scheme      *runtime.Scheme
}

// NewProvider starts a broadcaster that records to c (a clientset's EventsV1()) until ctx
// ends or Shutdown is called, and the sink's series writer (StableNameSink.Run) until ctx
// ends; scheme must know the types events are recorded about. Errors: the library's, when
// it cannot start recording.
func NewProvider(ctx context.Context, c eventsv1client.EventsV1Interface, scheme *runtime.Scheme) (*Provider, error) {
	sink := NewStableNameSink(c)
	go sink.Run(ctx)
	b := events.NewBroadcaster(sink)
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("start recording events: %w", err)
	}
	return &Provider{broadcaster: b, scheme: scheme}, nil
}

// Recorder returns a recorder whose Events carry reportingController (a string such as
// "network-plugin-policy"; the library adds the reportingInstance "<reportingController>-<hostname>").
func (p *Provider) Recorder(reportingController string) events.EventRecorder {
	return WithoutResourceVersion(p.broadcaster.NewRecorder(p.scheme, reportingController), p.scheme)
}

// Shutdown stops the broadcaster; events recorded afterwards are dropped.
func (p *Provider) Shutdown() { p.broadcaster.Shutdown() }
