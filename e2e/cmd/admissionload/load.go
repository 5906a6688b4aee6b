package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
)

// kind says whether a pod goes through the mutating pod webhook.
type kind int

const (
	// kindWebhook pods carry the network type and conf: the webhook admits them.
	kindWebhook kind = iota
	// kindPlain pods carry neither: the webhook's matchConditions skip them.
	kindPlain
	// numKinds is the number of kinds, the length of per-kind arrays.
	numKinds
)

// String returns "webhook" or "no-webhook", the pods' name prefix and label value.
func (k kind) String() string {
	if k == kindWebhook {
		return "webhook"
	}
	return "no-webhook"
}

// labelKind is the pod label that holds the pod's kind; the Ready watch selects on it.
const labelKind = "admissionload.policy.game.kruise.io/kind"

// podGenerator builds the load test's pods.
type podGenerator struct {
	// namespace is where the pods are created.
	namespace string
	// plugin and conf are the network type and network-conf of kindWebhook pods.
	plugin, conf string
}

// pod returns pod i (0-based) of kind k, named <kind>-<i>: one game-server container with a
// UDP port 7777, no resource requests, no grace period; kindWebhook pods also carry the
// network type and conf annotations. Pods of both kinds are otherwise identical.
func (g podGenerator) pod(k kind, i int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-%05d", k, i),
			Namespace: g.namespace,
			Labels:    map[string]string{"app": "game", labelKind: k.String()},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "game", Image: "game-server:1.0",
				Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}},
			}},
		},
	}
	if k == kindWebhook {
		p.Annotations = map[string]string{
			networkstatus.AnnotationNetworkType: g.plugin,
			networkstatus.AnnotationNetworkConf: g.conf,
		}
	}
	return p
}

// warmUp sends n dry-run creates of each kind, alternating, so that the measured creates find
// the client's and the apiserver's connections (to etcd, to the webhook) open. A dry-run
// create runs admission, webhook included, and stores nothing. Errors are those of the creates.
func warmUp(ctx context.Context, cs kubernetes.Interface, g podGenerator, n int) error {
	for i := range n {
		for k := range numKinds {
			p := g.pod(k, i)
			p.Name = "warmup-" + p.Name
			if _, err := cs.CoreV1().Pods(g.namespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				return fmt.Errorf("warm-up dry-run create of pod %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// maxErrorMessages is how many failed creates the report quotes.
const maxErrorMessages = 5

// loadResult is what createPods measured.
type loadResult struct {
	// latencies are the durations of the successful creates, by kind, in completion order.
	latencies [numKinds][]time.Duration
	// errors counts the failed creates by kind.
	errors [numKinds]int
	// unexpected counts successful creates whose stored pod contradicts its kind: a
	// kindWebhook pod without network-status (the webhook did not mutate it) or a kindPlain
	// pod with one.
	unexpected [numKinds]int
	// firstErrors are the messages of the first maxErrorMessages failed creates.
	firstErrors []string
	// sent maps the name of every kindWebhook pod created to when its CREATE was sent.
	sent map[string]time.Time
	// elapsed is the wall-clock time of all creates.
	elapsed time.Duration
}

// createPods creates n pods of each kind with concurrency workers and measures each create.
// The work list interleaves the kinds in pairs whose order alternates (webhook, plain, plain,
// webhook, ...), so that at any time both kinds are in flight against the same cluster
// state. It stops early, with what it measured so far, when ctx ends.
func createPods(ctx context.Context, cs kubernetes.Interface, g podGenerator, n, concurrency int) *loadResult {
	type job struct {
		k kind
		i int
	}
	jobs := make(chan job)
	go func() {
		defer close(jobs)
		for i := range n {
			order := [2]kind{kindWebhook, kindPlain}
			if i%2 == 1 {
				order = [2]kind{kindPlain, kindWebhook}
			}
			for _, k := range order {
				select {
				case jobs <- job{k, i}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()

	res := &loadResult{sent: make(map[string]time.Time, n)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for j := range jobs {
				p := g.pod(j.k, j.i)
				sent := time.Now()
				got, err := cs.CoreV1().Pods(g.namespace).Create(ctx, p, metav1.CreateOptions{})
				took := time.Since(sent)
				mu.Lock()
				switch {
				case err != nil:
					if ctx.Err() == nil {
						res.errors[j.k]++
						if len(res.firstErrors) < maxErrorMessages {
							res.firstErrors = append(res.firstErrors, fmt.Sprintf("create pod %s: %v", p.Name, err))
						}
					}
				default:
					res.latencies[j.k] = append(res.latencies[j.k], took)
					_, mutated := got.Annotations[networkstatus.AnnotationNetworkStatus]
					if mutated != (j.k == kindWebhook) {
						res.unexpected[j.k]++
					}
					if j.k == kindWebhook {
						res.sent[p.Name] = sent
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}
