package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// kind is the admission path a measured pod takes.
type kind int

const (
	// kindNone pods carry no network-type and not the no-op label: no webhook is called.
	kindNone kind = iota
	// kindNoop pods carry the no-op label: only the no-op webhook is called.
	kindNoop
	// kindHostPort pods carry network-type Kubernetes-HostPort: only this project's webhook
	// is called.
	kindHostPort
	// kindNodePort pods carry network-type Kubernetes-NodePort: only this project's webhook
	// is called.
	kindNodePort
	// numKinds is the number of kinds, the length of per-kind arrays.
	numKinds
)

// kinds are the kinds in report order.
var kinds = [numKinds]kind{kindNone, kindNoop, kindHostPort, kindNodePort}

// String returns "none", "noop", "hostport" or "nodeport": the pods' name part, the value of
// labelKind and the kind's name in the report.
func (k kind) String() string {
	return [numKinds]string{"none", "noop", "hostport", "nodeport"}[k]
}

// viaManager reports whether pods of kind k go through this project's webhook.
func (k kind) viaManager() bool { return k == kindHostPort || k == kindNodePort }

// Labels and annotations of the measured pods.
const (
	// labelKind holds the pod's kind; the no-op webhook's objectSelector and the Ready watch
	// select on it.
	labelKind = "admissionload.policy.game.kruise.io/kind"
	// labelOwner is OpenKruise Game's GameServerSet label; ownerLoad is the value the measured
	// pods carry, which one policy of the load namespace selects.
	labelOwner = "game.kruise.io/owner-gss"
	ownerLoad  = "gss-load"
	// annotationPhase holds the phase that created the pod; every measured pod has it, so
	// every pod has an annotations map before admission.
	annotationPhase = "admissionload.policy.game.kruise.io/phase"
)

// Network type and conf of the kindHostPort and kindNodePort pods: one UDP game port, as in
// config/samples.
const (
	hostPortType = "Kubernetes-HostPort"
	hostPortConf = `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`
	nodePortType = "Kubernetes-NodePort"
	nodePortConf = `[{"name":"PortProtocols","value":"7777/UDP"}]`
)

// podGenerator builds the load test's pods.
type podGenerator struct {
	// namespace is where the pods are created.
	namespace string
}

// pod returns pod i (0-based) of kind k in phase, named <phase>-<kind>-<i>: one game-server
// container with a UDP port 7777, no resource requests, no grace period, the labels app,
// labelOwner and labelKind and the annotation annotationPhase. kindHostPort and kindNodePort
// pods also carry their network type and conf. The kinds are otherwise identical.
func (g podGenerator) pod(phase string, k kind, i int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%s-%05d", phase, k, i),
			Namespace:   g.namespace,
			Labels:      map[string]string{"app": "game", labelOwner: ownerLoad, labelKind: k.String()},
			Annotations: map[string]string{annotationPhase: phase},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "game", Image: "game-server:1.0",
				Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}},
			}},
		},
	}
	switch k {
	case kindHostPort:
		p.Annotations[networkstatus.AnnotationNetworkType] = hostPortType
		p.Annotations[networkstatus.AnnotationNetworkConf] = hostPortConf
	case kindNodePort:
		p.Annotations[networkstatus.AnnotationNetworkType] = nodePortType
		p.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
	}
	return p
}

// unexpected reports whether the pod the apiserver returned for a create of kind k
// contradicts its kind. Only a noop pod carries the no-op webhook's annotation. Only a
// hostport or nodeport pod carries the manager's decision annotation (pod.AnnotationDecision,
// written at every CREATE it admits); a hostport pod also has a host port on its container
// port 7777 (HostPort allocates at CREATE). Network-status is not looked at: the manager
// writes it at CREATE only for a scheduled pod, and these are not.
func unexpected(k kind, got *corev1.Pod) bool {
	_, noop := got.Annotations[annotationNoop]
	_, decided := got.Annotations[podwebhook.AnnotationDecision]
	if noop != (k == kindNoop) || decided != k.viaManager() {
		return true
	}
	return k == kindHostPort && !hasHostPort(got, 7777)
}

// hasHostPort reports whether a container of pod exposes containerPort with a host port.
func hasHostPort(pod *corev1.Pod, containerPort int32) bool {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort == containerPort && p.HostPort != 0 {
				return true
			}
		}
	}
	return false
}

// warmUp sends n dry-run creates of each kind, round robin, so that the measured creates
// find the client's and the apiserver's connections (to etcd, to both webhooks) open. A
// dry-run create runs admission, webhooks included, and stores nothing. It first waits, for
// up to a minute, until a dry-run no-op pod comes back with the no-op webhook's annotation:
// the apiserver picks up a new webhook configuration with a delay. Errors are those of the
// creates and that wait.
func warmUp(ctx context.Context, cs kubernetes.Interface, g podGenerator, phase string, n int) error {
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	deadline := time.Now().Add(time.Minute)
	for {
		p := g.pod("warmup-"+phase, kindNoop, 0)
		got, err := cs.CoreV1().Pods(g.namespace).Create(ctx, p, dry)
		if err != nil {
			return fmt.Errorf("warm-up dry-run create of pod %s: %w", p.Name, err)
		}
		if _, ok := got.Annotations[annotationNoop]; ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the no-op webhook did not mutate dry-run pod %s within a minute", p.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	for i := range n {
		for _, k := range kinds {
			p := g.pod("warmup-"+phase, k, i)
			if _, err := cs.CoreV1().Pods(g.namespace).Create(ctx, p, dry); err != nil {
				return fmt.Errorf("warm-up dry-run create of pod %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// maxErrorMessages is how many failed creates a phase's report quotes.
const maxErrorMessages = 5

// loadResult is what createPods measured.
type loadResult struct {
	// latencies are the durations of the successful creates, by kind, in completion order.
	latencies [numKinds][]time.Duration
	// errors counts the failed creates by kind.
	errors [numKinds]int
	// unexpected counts successful creates whose returned pod contradicts its kind (see
	// unexpected).
	unexpected [numKinds]int
	// firstErrors are the messages of the first maxErrorMessages failed creates.
	firstErrors []string
	// podBytes is the size of the JSON encoding of pod 0 of each kind as the apiserver
	// returned it (what admission made of it, as stored).
	podBytes [numKinds]int
	// sent maps the name of every kindNodePort pod created to when its CREATE was sent.
	sent map[string]time.Time
	// elapsed is the wall-clock time of all creates.
	elapsed time.Duration
}

// workerSequence returns the creates of worker w of concurrency workers when n pods of each
// kind are created: the rounds r = w, w+concurrency, w+2*concurrency, ... below n, each
// round one pod of every kind (pod index r), the kinds round robin with the first kind of
// the worker's j-th round rotating with j+w. So every worker alternates the kinds, every kind
// takes every position in a round equally often, and at any moment the kinds in flight are
// mixed.
func workerSequence(w, concurrency, n int) []job {
	var out []job
	for j, r := 0, w; r < n; j, r = j+1, r+concurrency {
		for k := range int(numKinds) {
			out = append(out, job{k: kind((j + w + k) % int(numKinds)), i: r})
		}
	}
	return out
}

// job is one create: pod i of kind k.
type job struct {
	k kind
	i int
}

// createPods creates n pods of each kind in phase with concurrency workers, each running its
// workerSequence, and measures each create. It stops early, with what it measured so far,
// when ctx ends.
func createPods(ctx context.Context, cs kubernetes.Interface, g podGenerator, phase string, n, concurrency int) *loadResult {
	res := &loadResult{sent: make(map[string]time.Time, n)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := range concurrency {
		seq := workerSequence(w, concurrency, n)
		wg.Go(func() {
			for _, j := range seq {
				if ctx.Err() != nil {
					return
				}
				p := g.pod(phase, j.k, j.i)
				sent := time.Now()
				got, err := cs.CoreV1().Pods(g.namespace).Create(ctx, p, metav1.CreateOptions{})
				took := time.Since(sent)
				size := 0
				if err == nil && j.i == 0 {
					if b, err := json.Marshal(got); err == nil {
						size = len(b)
					}
				}
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
					if size > 0 {
						res.podBytes[j.k] = size
					}
					if unexpected(j.k, got) {
						res.unexpected[j.k]++
					}
					if j.k == kindNodePort {
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
