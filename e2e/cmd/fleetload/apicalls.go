package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// apiCallKinds are what apiCalls counts: the manager's requests to the API server by HTTP
// method (client-go's rest_client_requests_total, which counts every request its clients
// send, watches and lists as GET) and the admission requests its webhook server answered
// (controller-runtime's controller_runtime_webhook_requests_total).
var apiCallKinds = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "webhook"}

// apiCalls are the counts of apiCallKinds, summed over the replicas.
type apiCalls map[string]float64

// scrapeAPICalls reads every running replica's counters.
func scrapeAPICalls(ctx context.Context, mgr *cluster.Manager) (apiCalls, error) {
	out := apiCalls{}
	for _, k := range apiCallKinds {
		name, label := "rest_client_requests_total", `method="`+k+`"`
		if k == "webhook" {
			name, label = "controller_runtime_webhook_requests_total", ""
		}
		v, err := mgr.Metric(ctx, name, label)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// since returns the counts between before and c (after).
func (c apiCalls) since(before apiCalls) apiCalls {
	out := apiCalls{}
	for k, v := range c {
		out[k] = v - before[k]
	}
	return out
}

// reportAPICalls renders each phase's manager calls per game server whose network turned
// Ready (per pod for the baseline and the floor, which the manager does not serve).
func reportAPICalls(b *strings.Builder, results []phaseResult) {
	b.WriteString("\nThe manager's API calls per game server, per phase (both replicas: rest_client_requests_total by method, GET includes lists and watches; webhook: admission requests answered; over the whole phase, its clean-up included; divided by the pods whose network turned Ready, or by the pods):\n\n")
	b.WriteString("| phase | " + strings.Join(apiCallKinds, " | ") + " | all API calls |\n|---|" + strings.Repeat("---:|", len(apiCallKinds)+1) + "\n")
	for _, r := range results {
		if r.calls == nil {
			continue
		}
		n := r.ready.n
		if n == 0 {
			n = r.pods
		}
		fmt.Fprintf(b, "| %s |", r.name)
		all := 0.0
		for _, k := range apiCallKinds {
			fmt.Fprintf(b, " %.2f |", r.calls[k]/float64(n))
			if k != "webhook" {
				all += r.calls[k]
			}
		}
		fmt.Fprintf(b, " %.2f |\n", all/float64(n))
	}
}
