package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// auditPolicy is the API server's audit policy of an -audit run (Metadata level: no bodies):
// every request of a ServiceAccount (the manager's replicas are the only ServiceAccount
// clients of this cluster that send many; the others are named by user in the report), and
// every write of a pod by anyone, whose mutating admission webhooks the API server notes in
// the event's annotations. Nothing else is recorded. RequestReceived is left out: a request
// is counted once, by its first recorded stage.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: Metadata
  resources: [{group: "", resources: ["pods", "pods/status"]}]
  verbs: ["create", "update", "patch"]
- level: None
`

// auditFlags writes the audit policy into dir and returns the kube-apiserver flags of an -audit
// run and the log's path. The log backend runs in batch mode, so that writing the log does not
// hold the requests; the size cap is far beyond a run's log (no rotation).
func auditFlags(dir string) (map[string]string, string, error) {
	policy, log := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, "", err
	}
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    log,
		"audit-log-format":  "json",
		"audit-log-mode":    "batch",
		"audit-log-maxsize": "100000",
	}, log, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event the report reads.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Verb    string `json:"verb"`
	URI     string `json:"requestURI"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	Received    time.Time         `json:"requestReceivedTimestamp"`
	Annotations map[string]string `json:"annotations"`
}

// auditCounts are an -audit run's counts of one phase: the manager's requests by "verb
// resource[/subresource]" (a non-resource request by its path), and the pod writes that
// called a mutating admission webhook by "verb resource by user" (the manager's replicas as
// "manager").
type auditCounts struct {
	manager   map[string]int
	admission map[string]int
}

// readAudit counts the requests of the audit log at path received within [from, to). A
// request is counted once (by its auditID) whatever its stages, and a pod write once however
// many mutating webhooks it called. managerUser is the manager replicas' user name
// ("system:serviceaccount:<namespace>:<name>"). A line that is not an event is an error
// naming the line, except the last, which the API server may still be writing.
func readAudit(path, managerUser string, from, to time.Time) (auditCounts, error) {
	out := auditCounts{manager: map[string]int{}, admission: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return out, err
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var bad error // the last line read, when it is not an event
	for line := 1; sc.Scan(); line++ {
		if bad != nil {
			return out, bad
		}
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			bad = fmt.Errorf("%s:%d: %w", path, line, err)
			continue
		}
		if e.Received.Before(from) || !e.Received.Before(to) || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		what := e.URI
		if e.ObjectRef != nil {
			what = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				what += "/" + e.ObjectRef.Subresource
			}
		} else if i := strings.IndexByte(what, '?'); i >= 0 {
			what = what[:i]
		}
		user := e.User.Username
		if user == managerUser {
			user = "manager"
			out.manager[e.Verb+" "+what]++
		}
		for k := range e.Annotations {
			if strings.HasPrefix(k, "mutation.webhook.admission.k8s.io/") {
				out.admission[e.Verb+" "+what+" by "+user]++
				break
			}
		}
	}
	return out, sc.Err()
}

// reportAudit renders each phase's audit counts per game server whose network turned Ready
// (per pod for the phases the manager does not serve), the largest first.
func reportAudit(b *strings.Builder, results []phaseResult) {
	b.WriteString("\nFrom the API server's audit log (-audit): the manager's requests per game server, by verb and resource (watches counted when they start), and the pod writes that called a mutating admission webhook, by writer:\n")
	for _, r := range results {
		if r.audit == nil {
			continue
		}
		n := r.ready.n
		if n == 0 {
			n = r.pods
		}
		fmt.Fprintf(b, "\n%s:\n\n| request | per game server | count |\n|---|---:|---:|\n", r.name)
		for _, part := range []struct {
			prefix string
			m      map[string]int
		}{{"", r.audit.manager}, {"admission: ", r.audit.admission}} {
			keys := make([]string, 0, len(part.m))
			for k := range part.m {
				keys = append(keys, k)
			}
			slices.SortFunc(keys, func(x, y string) int {
				if c := part.m[y] - part.m[x]; c != 0 {
					return c
				}
				return strings.Compare(x, y)
			})
			total := 0
			for _, k := range keys {
				total += part.m[k]
				fmt.Fprintf(b, "| %s%s | %.2f | %d |\n", part.prefix, k, float64(part.m[k])/float64(n), part.m[k])
			}
			fmt.Fprintf(b, "| %sall | %.2f | %d |\n", part.prefix, float64(total)/float64(n), total)
		}
	}
}
