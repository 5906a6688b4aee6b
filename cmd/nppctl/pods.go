package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// gameServerSetGVK is OpenKruise Game's GameServerSet, read as unstructured (this module
// does not import OKG's API).
var gameServerSetGVK = schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"}

// podSource is a pod to decide on and where it came from.
type podSource struct {
	pod *corev1.Pod
	// where is "file:document", "file:document, StatefulSet lobby" or "cluster".
	where string
	// replicas is the number of pods of a StatefulSet or GameServerSet (spec.replicas,
	// default 1), whose pod 0 pod is; 0 for other sources.
	replicas int32
	// statefulSet is true when pod is a StatefulSet's (its replicas carry the pod-name and
	// pod-index labels).
	statefulSet bool
}

// replica returns the source of pod i of the StatefulSet or GameServerSet whose pod 0 p
// is: named NAME-i, with a StatefulSet's pod-name and pod-index labels set for i.
func (p podSource) replica(i int32) podSource {
	pod := p.pod.DeepCopy()
	base := strings.TrimSuffix(pod.Name, "-0")
	pod.Name = fmt.Sprintf("%s-%d", base, i)
	if p.statefulSet {
		pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
		pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(int(i))
	}
	return podSource{pod: pod, where: p.where, replicas: p.replicas, statefulSet: p.statefulSet}
}

// key returns namespace/name of the pod, or namespace/generateName* for a Deployment pod.
func (p podSource) key() string {
	name := p.pod.Name
	if name == "" {
		name = p.pod.GenerateName + "*"
	}
	return p.pod.Namespace + "/" + name
}

// inputs are pods and namespaces read from files.
type inputs struct {
	pods       []podSource
	namespaces map[string]*corev1.Namespace
	// problems are documents that are not objects or do not decode; notes name skipped ones.
	problems, notes []string
}

// readInputs collects Pods, workload pod templates and Namespaces from docs; other kinds are
// skipped with a note.
func readInputs(docs []*document, defaultNamespace string) *inputs {
	in := &inputs{namespaces: map[string]*corev1.Namespace{}}
	for _, d := range docs {
		if d.err != nil {
			in.problems = append(in.problems, fmt.Sprintf("%s: %v", d.where(), d.err))
			continue
		}
		pod, ns, replicas, err := podFromDocument(d)
		switch {
		case err != nil:
			in.problems = append(in.problems, fmt.Sprintf("%s: %v", d.where(), err))
		case ns != nil:
			in.namespaces[ns.Name] = withNameLabel(ns)
		case pod == nil:
			in.notes = append(in.notes, fmt.Sprintf("%s: skipped %s: not a Pod, Deployment, StatefulSet, GameServerSet or Namespace", d.where(), d.describe()))
		default:
			if pod.Namespace == "" {
				pod.Namespace = defaultNamespace
			}
			where := d.where()
			if k := d.gvk().Kind; k != "Pod" {
				where = fmt.Sprintf("%s, %s %s", where, k, d.obj.GetName())
			}
			in.pods = append(in.pods, podSource{pod: pod, where: where, replicas: replicas,
				statefulSet: d.gvk() == appsv1.SchemeGroupVersion.WithKind("StatefulSet")})
		}
	}
	return in
}

// namespaceFor returns the Namespace object of name: the one read from a file, or one with
// only the kubernetes.io/metadata.name label, which the apiserver puts on every namespace.
func (in *inputs) namespaceFor(name string) *corev1.Namespace {
	if ns, ok := in.namespaces[name]; ok {
		return ns
	}
	return withNameLabel(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// withNameLabel sets the kubernetes.io/metadata.name label the apiserver sets on every
// namespace (NamespaceDefaultLabelName), on a copy of ns.
func withNameLabel(ns *corev1.Namespace) *corev1.Namespace {
	ns = ns.DeepCopy()
	ns.Labels = maps.Clone(ns.Labels)
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
	return ns
}

// podFromDocument returns the pod a document describes: a Pod as written; the first pod of
// a StatefulSet (NAME-0, with the statefulset.kubernetes.io/pod-name and
// apps.kubernetes.io/pod-index labels its controller adds) or of a GameServerSet (NAME-0,
// with the game.kruise.io/owner-gss label and the network-type and network-conf
// annotations from spec.network, as OKG stamps them); a Deployment's pod as admitted
// (generateName NAME-, no name). A Namespace is returned as ns. Other kinds return nothing.
// replicas is a StatefulSet's or GameServerSet's spec.replicas (1 when unset), 0 otherwise.
func podFromDocument(d *document) (pod *corev1.Pod, ns *corev1.Namespace, replicas int32, err error) {
	gvk := d.gvk()
	conv := runtime.DefaultUnstructuredConverter
	switch {
	case gvk == corev1.SchemeGroupVersion.WithKind("Pod"):
		pod = &corev1.Pod{}
		if err := conv.FromUnstructured(d.obj.Object, pod); err != nil {
			return nil, nil, 0, fmt.Errorf("decode Pod: %w", err)
		}
		return pod, nil, 0, nil
	case gvk == corev1.SchemeGroupVersion.WithKind("Namespace"):
		ns = &corev1.Namespace{}
		if err := conv.FromUnstructured(d.obj.Object, ns); err != nil {
			return nil, nil, 0, fmt.Errorf("decode Namespace: %w", err)
		}
		return nil, ns, 0, nil
	case gvk == appsv1.SchemeGroupVersion.WithKind("StatefulSet"):
		sts := &appsv1.StatefulSet{}
		if err := conv.FromUnstructured(d.obj.Object, sts); err != nil {
			return nil, nil, 0, fmt.Errorf("decode StatefulSet: %w", err)
		}
		pod = podFromTemplate(sts.Namespace, &sts.Spec.Template)
		pod.Name = sts.Name + "-0"
		pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
		pod.Labels[appsv1.PodIndexLabel] = "0"
		return pod, nil, ptrOr(sts.Spec.Replicas, 1), nil
	case gvk == appsv1.SchemeGroupVersion.WithKind("Deployment"):
		dep := &appsv1.Deployment{}
		if err := conv.FromUnstructured(d.obj.Object, dep); err != nil {
			return nil, nil, 0, fmt.Errorf("decode Deployment: %w", err)
		}
		pod = podFromTemplate(dep.Namespace, &dep.Spec.Template)
		pod.GenerateName = dep.Name + "-"
		return pod, nil, 0, nil
	case gvk == gameServerSetGVK:
		pod, ns, err := podFromGameServerSet(d.obj)
		if err != nil {
			return nil, nil, 0, err
		}
		replicas := gameServerSetReplicas(d.obj)
		if replicas < 0 || replicas > maxReplicas {
			return nil, nil, 0, fmt.Errorf("GameServerSet %s: spec.replicas: expected an integer from 0 to %d", d.obj.GetName(), maxReplicas)
		}
		return pod, ns, int32(replicas), nil
	}
	return nil, nil, 0, nil
}

// gameServerSetReplicas is a GameServerSet's spec.replicas: 1 when unset, -1 when it is not
// a whole number (YAML and JSON decoders give int64 or float64).
func gameServerSetReplicas(obj *unstructured.Unstructured) int64 {
	v, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas")
	if !found {
		return 1
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		if float64(int64(n)) == n {
			return int64(n)
		}
	}
	return -1
}

// maxReplicas bounds the replicas a Test case decides for with everyReplica.
const maxReplicas = 10000

// ptrOr returns *p, or def when p is nil.
func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func podFromTemplate(namespace string, t *corev1.PodTemplateSpec) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
	pod.Namespace = namespace
	pod.Labels = maps.Clone(pod.Labels)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Annotations = maps.Clone(pod.Annotations)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	return pod
}

// podFromGameServerSet renders the first pod of a GameServerSet: spec.gameServerTemplate
// (a pod template), the owner-gss label, and spec.network.networkType and networkConf as the
// network-type and network-conf annotations.
func podFromGameServerSet(obj *unstructured.Unstructured) (*corev1.Pod, *corev1.Namespace, error) {
	tmplMap, found, err := unstructured.NestedMap(obj.Object, "spec", "gameServerTemplate")
	if err != nil || !found {
		return nil, nil, fmt.Errorf("GameServerSet %s: spec.gameServerTemplate: expected a pod template", obj.GetName())
	}
	t := &corev1.PodTemplateSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmplMap, t); err != nil {
		return nil, nil, fmt.Errorf("GameServerSet %s: decode spec.gameServerTemplate: %w", obj.GetName(), err)
	}
	pod := podFromTemplate(obj.GetNamespace(), t)
	pod.Name = obj.GetName() + "-0"
	pod.Labels[networkstatus.LabelOwnerGSS] = obj.GetName()
	if nt, _, err := unstructured.NestedString(obj.Object, "spec", "network", "networkType"); err != nil {
		return nil, nil, fmt.Errorf("GameServerSet %s: spec.network.networkType: %w", obj.GetName(), err)
	} else if nt != "" {
		pod.Annotations[networkstatus.AnnotationNetworkType] = nt
	}
	if conf, found, err := unstructured.NestedSlice(obj.Object, "spec", "network", "networkConf"); err != nil {
		return nil, nil, fmt.Errorf("GameServerSet %s: spec.network.networkConf: %w", obj.GetName(), err)
	} else if found {
		data, err := json.Marshal(conf)
		if err != nil {
			return nil, nil, fmt.Errorf("GameServerSet %s: spec.network.networkConf: %w", obj.GetName(), err)
		}
		pod.Annotations[networkstatus.AnnotationNetworkConf] = string(data)
	}
	return pod, nil, nil
}
