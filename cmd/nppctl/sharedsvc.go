package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/sharedport"
)

// sharedServiceRow is a shared-port Service (AlibabaCloud-SLB-SharedPort,
// AlibabaCloud-NLB-SharedPort) that selects no game server: the manager never deletes one
// (its listeners may be wanted again), so the platform decides.
type sharedServiceRow struct {
	// Service is the Service's "<namespace>/<name>".
	Service string `json:"service"`
	// Plugin is the network type whose shared Service it is.
	Plugin string `json:"plugin"`
	// LoadBalancer is the load balancer id (the Service's name).
	LoadBalancer string `json:"loadBalancer"`
	// Age is how long the Service has existed at the report's time ("3d4h", as the
	// other ages).
	Age string `json:"age"`
	// Address is the Service's load-balancer address (ingress IP, or hostname), "" without one.
	Address string `json:"address,omitempty"`
}

// sharedPortPlugins are the plugins whose shared Services status looks for.
var sharedPortPlugins = []*sharedport.Plugin{alibabacloud.NewSLBSharedPort(), alibabacloud.NewNLBSharedPort()}

// unusedSharedServices returns the shared Services among svcs (of namespace, every one when
// empty) that select none of pods, sorted by Service, with their ages at now.
func unusedSharedServices(svcs []*corev1.Service, pods []*corev1.Pod, namespace string, now time.Time) []sharedServiceRow {
	var out []sharedServiceRow
	for _, svc := range svcs {
		if namespace != "" && svc.Namespace != namespace {
			continue
		}
		for _, p := range sharedPortPlugins {
			if !p.SharedService(svc) {
				continue
			}
			used := slices.ContainsFunc(pods, func(pod *corev1.Pod) bool {
				return pod.Namespace == svc.Namespace && pod.DeletionTimestamp == nil && pod.Labels[p.PodLabel()] == svc.Name
			})
			if used {
				break
			}
			row := sharedServiceRow{Service: svc.Namespace + "/" + svc.Name, Plugin: p.Name(), LoadBalancer: svc.Name,
				Age: age(now.Sub(svc.CreationTimestamp.Time))}
			if in := svc.Status.LoadBalancer.Ingress; len(in) > 0 {
				row.Address = in[0].IP
				if row.Address == "" {
					row.Address = in[0].Hostname
				}
			}
			out = append(out, row)
			break
		}
	}
	slices.SortFunc(out, func(a, b sharedServiceRow) int { return strings.Compare(a.Service, b.Service) })
	return out
}

// liveServices lists the Services of namespace (every namespace when empty), 500 at a time.
// A list that fails is a note on errOut and none (status needs no more than pods; a
// Forbidden must not look like no Service).
func liveServices(ctx context.Context, c *clients, namespace string, errOut io.Writer) []*corev1.Service {
	var out []*corev1.Service
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.core.CoreV1().Services(namespace).List(ctx, opts)
		if err != nil {
			fmt.Fprintf(errOut, "note: Services were not listed (unused shared Services are not shown): %v\n", err)
			return nil
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out
		}
	}
}

// servicesIn returns the Services among docs, also inside Lists; documents that are not
// Services, or do not decode, are skipped.
func servicesIn(docs []*document) []*corev1.Service {
	var out []*corev1.Service
	eachOfKind(docs, "Service", func(obj map[string]any) {
		svc := &corev1.Service{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj, svc) == nil {
			out = append(out, svc)
		}
	})
	return out
}
