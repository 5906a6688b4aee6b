package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// listPageSize is the page size client-go's reflector lists with (its default chunking).
const listPageSize = 500

// coldStart is -restart's result: a replica restarted on the cluster of the last step.
type coldStart struct {
	// pods is the cluster's size; replica the one restarted (not the leader).
	pods    int
	replica string
	// listPaged and listWhole are one list of every pod, in pages of listPageSize and in
	// one response: the floor of a cache's first sync.
	listPaged, listWhole time.Duration
	// ready is from the process's start to /readyz answering 200; synced the manager's own
	// figure, from its "Network plugins initialised" log line's took (its informers'
	// initial lists and handlers), and syncedOK whether the line was found.
	ready, synced time.Duration
	syncedOK      bool
	// writes are the replica's API writes (POST, PUT, PATCH, DELETE) from its start until
	// settle after it was ready; writesOther those of the other replicas over the same time.
	writes, writesOther float64
	settle              time.Duration
}

// restartReplica measures a cold start: lists every pod once (paged and whole), then stops
// a replica that does not lead (SIGTERM; the Deployment's rollout does the same) and starts
// it again, timing /readyz, and reads its writes until settle after. Its log is
// <logDir>/<replica>.log.
func restartReplica(ctx context.Context, cs kubernetes.Interface, mgr *cluster.Manager, logDir string, pods int, settle time.Duration) (*coldStart, error) {
	res := &coldStart{pods: pods, settle: settle}
	start := time.Now()
	cont := ""
	for {
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: listPageSize, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	res.listPaged = time.Since(start)
	start = time.Now()
	if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	res.listWhole = time.Since(start)

	leader, err := mgr.Leader(ctx)
	if err != nil {
		return nil, err
	}
	var r *cluster.Replica
	for _, c := range mgr.Replicas {
		if c != leader {
			r = c
			break
		}
	}
	if r == nil {
		return nil, fmt.Errorf("no replica but the leader")
	}
	res.replica = r.Name
	others := func() float64 {
		var sum float64
		for _, c := range mgr.Replicas {
			if c != r {
				sum += writesOf(ctx, c)
			}
		}
		return sum
	}
	r.Stop()
	otherBefore := others()
	start = time.Now()
	if err := r.Start(ctx); err != nil {
		return nil, fmt.Errorf("restart %s: %w", r.Name, err)
	}
	res.ready = time.Since(start)
	if err := sleep(ctx, settle); err != nil {
		return nil, err
	}
	res.writes, res.writesOther = writesOf(ctx, r), others()-otherBefore
	res.synced, res.syncedOK = lastSyncTook(filepath.Join(logDir, r.Name+".log"))
	return res, nil
}

// writesOf returns replica r's API writes so far (client-go's rest_client_requests_total for
// POST, PUT, PATCH and DELETE); 0 when it does not answer.
func writesOf(ctx context.Context, r *cluster.Replica) float64 {
	var sum float64
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		v, _ := r.Metric(ctx, "rest_client_requests_total", `method="`+method+`"`)
		sum += v
	}
	return sum
}

// lastSyncTook returns the took of the last "Network plugins initialised" line of the
// replica's log at path (JSON lines, as the Deployment logs).
func lastSyncTook(path string) (time.Duration, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var took time.Duration
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "Network plugins initialised") {
			continue
		}
		var line struct {
			Took string `json:"took"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if d, err := time.ParseDuration(line.Took); err == nil {
			took, found = d, true
		}
	}
	return took, found
}

// markdown renders the cold start.
func (c *coldStart) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Cold start at %d pods\n\n", c.pods)
	fmt.Fprintf(&b, "- one list of every pod (the floor of a cache's first sync): %.1f s in pages of %d (as client-go's reflector lists), %.1f s in one response\n",
		c.listPaged.Seconds(), listPageSize, c.listWhole.Seconds())
	fmt.Fprintf(&b, "- %s (not the leader) stopped with SIGTERM and started again: /readyz 200 after %.1f s from its start\n", c.replica, c.ready.Seconds())
	if c.syncedOK {
		fmt.Fprintf(&b, "- its own log: \"Network plugins initialised\" (the plugins' informers synced, which /readyz waits for) after %.1f s of waiting\n", c.synced.Seconds())
	}
	fmt.Fprintf(&b, "- API writes from its start until %s after it was ready: %.0f by it, %.0f by the other replicas\n", c.settle, c.writes, c.writesOther)
	return b.String()
}
