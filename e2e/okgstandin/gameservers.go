package okgstandin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// OKG's resources and keys (kruise-game-manager d76ace2, apis/v1alpha1).
var (
	GameServerSets = schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}
	GameServers    = schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameservers"}
)

// Pod labels and annotations OKG's GameServer controller writes (SyncGsToPod).
const (
	LabelOwnerGSS                  = "game.kruise.io/owner-gss"
	LabelDeletePriority            = "game.kruise.io/gs-delete-priority"
	LabelUpdatePriority            = "game.kruise.io/gs-update-priority"
	LabelOpsState                  = "game.kruise.io/gs-opsState"
	LabelState                     = "game.kruise.io/gs-state"
	LabelNetworkDisabled           = "game.kruise.io/network-disabled"
	AnnotationOpsStateChanged      = "game.kruise.io/opsState-last-changed-time"
	AnnotationStateChanged         = "game.kruise.io/state-last-changed-time"
	AnnotationNetworkType          = "game.kruise.io/network-type"
	AnnotationNetworkConf          = "game.kruise.io/network-conf"
	AnnotationNetworkStatus        = "game.kruise.io/network-status"
	AnnotationNetworkTriggerTime   = "game.kruise.io/network-trigger-time"
	defaultNetworkProbeInterval    = 5 * time.Second  // NETWORK_PROBE_INTERVAL_TIME
	defaultNetworkTotalWaitingTime = 60 * time.Second // NETWORK_TOTAL_WAIT_TIME
)

// Controllers stand in for OKG's GameServerSet and GameServer controllers in one namespace,
// reproducing these facts, and nothing more:
//
//   - A GameServerSet gets a workload that makes pods <gss>-<ordinal> labelled
//     game.kruise.io/owner-gss: <gss>, annotated game.kruise.io/network-type and
//     game.kruise.io/network-conf (a JSON list of {"name","value"}) from spec.network, with
//     the template's containers; spec.replicas scales it up and down, and a deleted pod comes
//     back with its name. OKG makes an OpenKruise Advanced StatefulSet; the stand-in makes an
//     apps/v1 StatefulSet (owned by the GameServerSet, Parallel), which does the same for all
//     of the above.
//   - One GameServer per pod, of the pod's name (owned by the pod).
//   - On each GameServer reconcile (here: every Interval) OKG patches the pod, where they
//     differ: labels gs-delete-priority, gs-update-priority ("0"), gs-opsState ("None"),
//     gs-state (from the pod's phase and Ready condition), network-disabled ("true"/"false"
//     from the GameServer's spec.networkDisabled); annotations opsState-last-changed-time and
//     state-last-changed-time; and network-trigger-time (RFC 3339, now) when the pod has a
//     network-type and the stored value does not parse, or is older than 5 s while the
//     GameServer's status.networkStatus.lastTransitionTime is younger than 60 s.
//   - It copies the pod's network-status into the GameServer's status.networkStatus; while
//     the pod has none, it sets currentNetworkState NotReady and moves lastTransitionTime to
//     now. lastTransitionTime also moves when the desired state (networkDisabled) changes,
//     not when currentNetworkState does.
//
// Every pod write is a merge patch: a pod UPDATE that reaches every mutating webhook. Denied
// counts the ones refused.
//
// OKG's GameServer controller also reconciles a pod at each of its events (it watches pods):
// WatchPods adds that second pod writer, so that a pod's scheduling (its node, its IP, its
// phase) is answered by a write at the same moment as this manager's own network trigger
// answers it.
type Controllers struct {
	cs        kubernetes.Interface
	dyn       dynamic.Interface
	namespace string
	// Interval is how often every GameServerSet and GameServer is reconciled.
	Interval time.Duration

	// Denied counts pod writes the API server refused (an admission webhook's denial).
	Denied atomic.Int64
	// TriggerStamps counts network-trigger-time stamps written.
	TriggerStamps atomic.Int64
	// SameInstantWrites, above 1, makes the pod watch answer a game server's scheduling
	// first of all (before the GameServer's writes) with that many network-trigger-time
	// stamps sent at once: their UPDATEs meet in admission with each other and with this
	// manager's own trigger, as OKG's write and the trigger meet by chance. 0 or 1: none.
	SameInstantWrites int

	mu sync.Mutex
	// scheduled are the pods whose scheduling the pod watch saw (SameInstantWrites).
	scheduled map[types.UID]bool
	lastErr   error
	// watchErr is the pod watch's first error (WatchPods), kept until Stop: the interval's
	// reconciles do not overwrite it.
	watchErr error
	cancel   context.CancelFunc
	done     chan struct{}
	watches  sync.WaitGroup
}

// StartControllers runs the stand-in's controllers for namespace until Stop.
func StartControllers(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, namespace string) *Controllers {
	ctx, cancel := context.WithCancel(ctx)
	c := &Controllers{cs: cs, dyn: dyn, namespace: namespace, Interval: time.Second, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(c.Interval)
		defer t.Stop()
		for {
			c.setErr(c.reconcile(ctx))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return c
}

// Stop stops the controllers, the pod watch included.
func (c *Controllers) Stop() {
	c.cancel()
	<-c.done
	c.watches.Wait()
}

// WatchPods makes the GameServer controller reconcile a pod (its GameServer, SyncGsToPod) at
// each ADDED or MODIFIED event of it too, as OKG's does, until ctx ends or Stop. A watch the
// API server closes is started again from the last resourceVersion seen. Its first error
// stays in LastError. Errors come from the first watch's start.
func (c *Controllers) WatchPods(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	w, err := c.cs.CoreV1().Pods(c.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: LabelOwnerGSS})
	if err != nil {
		cancel()
		return fmt.Errorf("watch pods: %w", err)
	}
	c.watches.Add(2)
	go func() { // ends the watch at Stop
		defer c.watches.Done()
		select {
		case <-ctx.Done():
		case <-c.done:
		}
		cancel()
	}()
	go func() {
		defer c.watches.Done()
		rv := ""
		for {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					c.setWatchErr(fmt.Errorf("pod watch: %v", ev.Object))
					rv = "" // expired: start from now
					continue
				}
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = pod.ResourceVersion
				if (ev.Type != watch.Added && ev.Type != watch.Modified) || pod.DeletionTimestamp != nil {
					continue
				}
				if err := c.sameInstant(ctx, pod); err != nil {
					c.setWatchErr(err)
				}
				if err := c.syncGameServer(ctx, pod); err != nil {
					c.setWatchErr(err)
				}
			}
			w.Stop()
			if ctx.Err() != nil {
				return
			}
			if w, err = c.cs.CoreV1().Pods(c.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: LabelOwnerGSS, ResourceVersion: rv}); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.setWatchErr(fmt.Errorf("watch pods again: %w", err))
				return
			}
		}
	}()
	return nil
}

// sameInstant sends SameInstantWrites network-trigger-time stamps at once the first time the
// pod watch sees the pod scheduled and its network not Ready.
func (c *Controllers) sameInstant(ctx context.Context, pod *corev1.Pod) error {
	if c.SameInstantWrites < 2 || pod.Spec.NodeName == "" || strings.Contains(pod.Annotations[AnnotationNetworkStatus], `"Ready"`) {
		return nil
	}
	c.mu.Lock()
	if c.scheduled == nil {
		c.scheduled = map[types.UID]bool{}
	}
	seen := c.scheduled[pod.UID]
	c.scheduled[pod.UID] = true
	c.mu.Unlock()
	if seen {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationNetworkTriggerTime: time.Now().UTC().Format(time.RFC3339)}}})
	if err != nil {
		return err
	}
	errs := make([]error, c.SameInstantWrites)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			if _, err := c.cs.CoreV1().Pods(c.namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs[i] = fmt.Errorf("patch pod %s (same instant): %w", pod.Name, err)
			}
		})
	}
	wg.Wait()
	c.TriggerStamps.Add(int64(c.SameInstantWrites))
	return errors.Join(errs...)
}

func (c *Controllers) setWatchErr(err error) {
	c.mu.Lock()
	if c.watchErr == nil {
		c.watchErr = err
	}
	c.mu.Unlock()
}

// LastError is the pod watch's first error (WatchPods), or else the last interval
// reconcile's error; nil when both went through.
func (c *Controllers) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchErr != nil {
		return c.watchErr
	}
	return c.lastErr
}

func (c *Controllers) setErr(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

func (c *Controllers) reconcile(ctx context.Context) error {
	list, err := c.dyn.Resource(GameServerSets).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list GameServerSets: %w", err)
	}
	for i := range list.Items {
		if err := c.syncWorkload(ctx, &list.Items[i]); err != nil {
			return err
		}
	}
	pods, err := c.cs.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelOwnerGSS})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			continue
		}
		if err := c.syncGameServer(ctx, &pods.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// syncWorkload creates or scales the StatefulSet of gss.
func (c *Controllers) syncWorkload(ctx context.Context, gss *unstructured.Unstructured) error {
	replicas, _, _ := unstructured.NestedInt64(gss.Object, "spec", "replicas")
	sts, err := c.cs.AppsV1().StatefulSets(c.namespace).Get(ctx, gss.GetName(), metav1.GetOptions{})
	if err == nil {
		if sts.Spec.Replicas == nil || int64(*sts.Spec.Replicas) != replicas {
			sts.Spec.Replicas = ptr.To(int32(replicas))
			if _, err := c.cs.AppsV1().StatefulSets(c.namespace).Update(ctx, sts, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("scale StatefulSet %s: %w", gss.GetName(), err)
			}
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get StatefulSet %s: %w", gss.GetName(), err)
	}
	networkType, _, _ := unstructured.NestedString(gss.Object, "spec", "network", "networkType")
	conf, _, _ := unstructured.NestedSlice(gss.Object, "spec", "network", "networkConf")
	confJSON, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	var containers []corev1.Container
	raw, _, _ := unstructured.NestedSlice(gss.Object, "spec", "gameServerTemplate", "spec", "containers")
	data, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &containers); err != nil {
		return fmt.Errorf("GameServerSet %s containers: %w", gss.GetName(), err)
	}
	labels := map[string]string{LabelOwnerGSS: gss.GetName()}
	annotations := map[string]string{}
	if networkType != "" {
		annotations[AnnotationNetworkType] = networkType
		annotations[AnnotationNetworkConf] = string(confJSON)
	}
	sts = &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: gss.GetName(), Namespace: c.namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "game.kruise.io/v1alpha1", Kind: "GameServerSet", Name: gss.GetName(), UID: gss.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(replicas)),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:         gss.GetName(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
	if _, err := c.cs.AppsV1().StatefulSets(c.namespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StatefulSet %s: %w", gss.GetName(), err)
	}
	return nil
}

// syncGameServer creates the pod's GameServer and does SyncGsToPod and the status copy.
func (c *Controllers) syncGameServer(ctx context.Context, pod *corev1.Pod) error {
	gsClient := c.dyn.Resource(GameServers).Namespace(c.namespace)
	gs, err := gsClient.Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		gs = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServer",
			"metadata": map[string]any{"name": pod.Name, "namespace": c.namespace,
				"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID)}}},
			"spec": map[string]any{"networkDisabled": false},
		}}
		if gs, err = gsClient.Create(ctx, gs, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			// The other writer (the interval or the pod watch) made it first.
			gs, err = gsClient.Get(ctx, pod.Name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("create GameServer %s: %w", pod.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("get GameServer %s: %w", pod.Name, err)
	}
	disabled, _, _ := unstructured.NestedBool(gs.Object, "spec", "networkDisabled")
	now := time.Now()

	// status.networkStatus: copied from the pod; NotReady with lastTransitionTime now while
	// the pod has none; lastTransitionTime moves when the desired state changes.
	desired := "Ready"
	if disabled {
		desired = "NotReady"
	}
	prevStatus, _, _ := unstructured.NestedMap(gs.Object, "status", "networkStatus")
	transition, _, _ := unstructured.NestedString(gs.Object, "status", "networkStatus", "lastTransitionTime")
	status := map[string]any{"networkType": pod.Annotations[AnnotationNetworkType], "desiredNetworkState": desired}
	if s := pod.Annotations[AnnotationNetworkStatus]; s != "" {
		var ps map[string]any
		if err := json.Unmarshal([]byte(s), &ps); err == nil {
			for _, k := range []string{"internalAddresses", "externalAddresses", "currentNetworkState"} {
				if v, ok := ps[k]; ok {
					status[k] = v
				}
			}
		}
		if transition == "" || (prevStatus != nil && prevStatus["desiredNetworkState"] != desired) {
			transition = now.UTC().Format(time.RFC3339)
		}
	} else {
		status["currentNetworkState"] = "NotReady"
		transition = now.UTC().Format(time.RFC3339)
	}
	status["lastTransitionTime"] = transition
	if !equalJSON(prevStatus, status) {
		if err := unstructured.SetNestedMap(gs.Object, status, "status", "networkStatus"); err != nil {
			return err
		}
		if _, err := gsClient.UpdateStatus(ctx, gs, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("update GameServer %s status: %w", pod.Name, err)
		}
	}

	// SyncGsToPod.
	labels := map[string]string{
		LabelDeletePriority: "0", LabelUpdatePriority: "0", LabelOpsState: "None",
		LabelState: gsState(pod), LabelNetworkDisabled: fmt.Sprint(disabled),
	}
	annotations := map[string]string{}
	for _, k := range []string{AnnotationOpsStateChanged, AnnotationStateChanged} {
		if pod.Annotations[k] == "" {
			annotations[k] = now.UTC().Format(time.RFC3339)
		}
	}
	if pod.Annotations[AnnotationNetworkType] != "" {
		last, err := time.Parse(time.RFC3339, pod.Annotations[AnnotationNetworkTriggerTime])
		lt, terr := time.Parse(time.RFC3339, transition)
		if err != nil || (now.Sub(last) > defaultNetworkProbeInterval && terr == nil && now.Sub(lt) < defaultNetworkTotalWaitingTime) {
			annotations[AnnotationNetworkTriggerTime] = now.UTC().Format(time.RFC3339)
		}
	}
	patchLabels := map[string]string{}
	for k, v := range labels {
		if pod.Labels[k] != v {
			patchLabels[k] = v
		}
	}
	if len(patchLabels) == 0 && len(annotations) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patchLabels, "annotations": annotations}})
	if err != nil {
		return err
	}
	if _, err := c.cs.CoreV1().Pods(c.namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		c.Denied.Add(1)
		return fmt.Errorf("patch pod %s (SyncGsToPod): %w", pod.Name, err)
	}
	if _, ok := annotations[AnnotationNetworkTriggerTime]; ok {
		c.TriggerStamps.Add(1)
	}
	return nil
}

// gsState is the GameServer state OKG derives from the pod: Deleting while it terminates,
// Creating while Pending, Ready or NotReady from the Ready condition while Running, Crash
// once Failed.
func gsState(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "Deleting"
	case pod.Status.Phase == corev1.PodFailed:
		return "Crash"
	case pod.Status.Phase != corev1.PodRunning:
		return "Creating"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return "Ready"
		}
	}
	return "NotReady"
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
