package main

import (
	"context"
	"fmt"
	"sort"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// eventListPage is the page size of the Event lists.
const eventListPage = 1000

// eventCount summarizes the Event objects about the load's pods.
type eventCount struct {
	// coreV1 and eventsV1 count the Event objects of the namespaces as listed through
	// core/v1 and through events.k8s.io/v1: the same objects (one storage), so the two must
	// agree; both are listed to show it.
	coreV1, eventsV1 int
	// aboutPods counts the events.k8s.io Events whose regarding object is a Pod;
	// podsWithEvents the distinct pods among them.
	aboutPods, podsWithEvents int
	// occurrences sums, over those Events, the occurrences they stand for (1, or
	// series.count).
	occurrences int
	// maxPerKey is the most Event objects for one pod, one distinct error (type, reason,
	// action, note) and one reportingInstance; keysOverOne counts such keys with more than
	// one Event object. maxPerError is the same without the reportingInstance. Each replica
	// may hold one Event per pod and error; replicas on one machine share a reportingInstance.
	maxPerKey, keysOverOne, maxPerError int
	// instances are the distinct reportingInstances of those Events. client-go derives one
	// from the reporting controller and the hostname, so replicas that share a machine (as
	// here) share it: their Events cannot be told apart by it.
	instances int
	// reasons counts the Event objects about pods per reason, "<type>/<reason>".
	reasons map[string]int
}

// countEvents lists the Events of the namespaces, through both APIs, and groups the
// events.k8s.io ones about pods. Errors: a list that fails.
func countEvents(ctx context.Context, cs kubernetes.Interface, namespaces []string) (eventCount, error) {
	c := eventCount{reasons: map[string]int{}}
	perKey := map[[6]string]int{}
	perError := map[[5]string]int{}
	pods, instances := map[string]bool{}, map[string]bool{}
	for _, ns := range namespaces {
		opts := metav1.ListOptions{Limit: eventListPage}
		for {
			l, err := cs.CoreV1().Events(ns).List(ctx, opts)
			if err != nil {
				return c, fmt.Errorf("list core/v1 Events of %s: %w", ns, err)
			}
			c.coreV1 += len(l.Items)
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
		opts = metav1.ListOptions{Limit: eventListPage}
		for {
			l, err := cs.EventsV1().Events(ns).List(ctx, opts)
			if err != nil {
				return c, fmt.Errorf("list events.k8s.io Events of %s: %w", ns, err)
			}
			c.eventsV1 += len(l.Items)
			for i := range l.Items {
				e := &l.Items[i]
				if e.Regarding.Kind != "Pod" {
					continue
				}
				c.aboutPods++
				c.occurrences += occurrences(e)
				pod := e.Regarding.Namespace + "/" + e.Regarding.Name + "/" + string(e.Regarding.UID)
				pods[pod] = true
				instances[e.ReportingInstance] = true
				c.reasons[e.Type+"/"+e.Reason]++
				perError[[5]string{pod, e.Type, e.Reason, e.Action, e.Note}]++
				perKey[[6]string{pod, e.Type, e.Reason, e.Action, e.Note, e.ReportingInstance}]++
			}
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
	}
	c.podsWithEvents, c.instances = len(pods), len(instances)
	for _, n := range perKey {
		c.maxPerKey = max(c.maxPerKey, n)
		if n > 1 {
			c.keysOverOne++
		}
	}
	for _, n := range perError {
		c.maxPerError = max(c.maxPerError, n)
	}
	return c, nil
}

// occurrences returns how many occurrences Event e stands for: its series count, or 1.
func occurrences(e *eventsv1.Event) int {
	if e.Series != nil && e.Series.Count > 0 {
		return int(e.Series.Count)
	}
	if e.DeprecatedCount > 0 {
		return int(e.DeprecatedCount)
	}
	return 1
}

// reasonList returns the reasons of c as "<type>/<reason>: n", sorted.
func (c eventCount) reasonList() []string {
	out := make([]string, 0, len(c.reasons))
	for r, n := range c.reasons {
		out = append(out, fmt.Sprintf("%s: %d", r, n))
	}
	sort.Strings(out)
	return out
}
