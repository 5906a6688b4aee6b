package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// ledgerRow is what one namespace holds on one load balancer, from the load-balancer
// plugins' port ledger (pkg/plugin/lb, ConfigMapLedger).
type ledgerRow struct {
	// Plugin is the ledger's group: the network type, or the group plugins sharing load
	// balancers have in common.
	Plugin string `json:"plugin"`
	// LoadBalancer is the load balancer id, as pods named it.
	LoadBalancer string `json:"loadBalancer"`
	Namespace    string `json:"namespace"`
	// Ports are the listener ports held, ascending, as ranges ("500-503,510").
	Ports string `json:"ports"`
	// Count is how many ports are held.
	Count int `json:"count"`
	// Owners is how many Services (or pods not yet seen) hold them.
	Owners int `json:"owners"`
	// Oldest is the time of the oldest claim, RFC 3339.
	Oldest string `json:"oldest"`
}

// liveLedger reads the ledger's ConfigMaps (lb.LedgerConfigMapNames of name) in managerNS
// by name; those that do not exist are skipped, and those that cannot be read are skipped
// with a note on errOut naming them and the error (status needs no more than pods and the
// Lease; a Forbidden must not look like an empty ledger).
func liveLedger(ctx context.Context, c *clients, managerNS, name string, errOut io.Writer) []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for _, n := range lb.LedgerConfigMapNames(name) {
		cm, err := c.core.CoreV1().ConfigMaps(managerNS).Get(ctx, n, metav1.GetOptions{})
		switch {
		case err == nil:
			out = append(out, cm)
		case !apierrors.IsNotFound(err):
			fmt.Fprintf(errOut, "note: the load-balancer port ledger's ConfigMap %s/%s was not read (its ports are not shown): %v\n", managerNS, n, err)
		}
	}
	return out
}

// ledgerRows sums the ledger's claims (cms) by plugin group, load balancer and namespace, for
// namespace (every namespace when empty) and loadBalancer (every one when empty), sorted by
// the three.
func ledgerRows(cms []*corev1.ConfigMap, namespace, loadBalancer string) []ledgerRow {
	type key struct{ plugin, lb, ns string }
	ports := map[key][]int32{}
	owners := map[key]map[string]bool{}
	oldest := map[key]time.Time{}
	for _, cm := range cms {
		for group, lbs := range lb.ParseLedger(cm.Data) {
			for id, claims := range lbs {
				if loadBalancer != "" && id != loadBalancer {
					continue
				}
				for port, claim := range claims {
					ns, _, _ := strings.Cut(claim.Owner, "/")
					if namespace != "" && ns != namespace {
						continue
					}
					k := key{group, id, ns}
					ports[k] = append(ports[k], port)
					if owners[k] == nil {
						owners[k] = map[string]bool{}
					}
					owners[k][claim.Owner] = true
					if o, ok := oldest[k]; !ok || claim.At.Before(o) {
						oldest[k] = claim.At
					}
				}
			}
		}
	}
	out := make([]ledgerRow, 0, len(ports))
	for k, ps := range ports {
		slices.Sort(ps)
		out = append(out, ledgerRow{Plugin: k.plugin, LoadBalancer: k.lb, Namespace: k.ns, Ports: portRanges(ps),
			Count: len(ps), Owners: len(owners[k]), Oldest: oldest[k].UTC().Format(time.RFC3339)})
	}
	slices.SortFunc(out, func(a, b ledgerRow) int {
		return strings.Compare(a.Plugin+"\x00"+a.LoadBalancer+"\x00"+a.Namespace, b.Plugin+"\x00"+b.LoadBalancer+"\x00"+b.Namespace)
	})
	return out
}

// portRanges writes ascending ports as ranges: "500-503,510".
func portRanges(ps []int32) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(ps[i])))
		if j > i {
			fmt.Fprintf(&b, "-%d", ps[j])
		}
		i = j + 1
	}
	return b.String()
}

// ledgerConfigMaps returns the ledger's ConfigMaps (lb.LedgerConfigMapNames of name, in
// managerNS) among docs, also inside Lists; documents that are not such a ConfigMap, or do
// not decode, are skipped (podsAndLease reports what does not decode).
func ledgerConfigMaps(docs []*document, managerNS, name string) []*corev1.ConfigMap {
	names := lb.LedgerConfigMapNames(name)
	var out []*corev1.ConfigMap
	eachOfKind(docs, "ConfigMap", func(obj map[string]any) {
		cm := &corev1.ConfigMap{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj, cm) == nil && cm.Namespace == managerNS && slices.Contains(names, cm.Name) {
			out = append(out, cm)
		}
	})
	return out
}
