package networkstatus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// DecodeConf parses a game.kruise.io/network-conf value. The value must be a JSON list
// of objects with a string "name" and a string "value"; "" and "null" decode to an
// empty Conf. Anything else (not JSON, not a list, an entry without a name, unknown
// keys in an entry, trailing data) is a ParameterError whose Param is the annotation.
func DecodeConf(s string) (Conf, error) {
	if s == "" {
		return nil, nil
	}
	var raw []map[string]json.RawMessage
	if err := strictUnmarshal(s, &raw); err != nil {
		return nil, &plugin.Error{Type: plugin.ParameterError, Param: AnnotationNetworkConf,
			Message: `must be a JSON list of {"name": string, "value": string}`, Err: err}
	}
	conf := make(Conf, 0, len(raw))
	for i, m := range raw {
		if m == nil {
			return nil, plugin.ParamErrorf(AnnotationNetworkConf, "entry %d is null, expected {\"name\": string, \"value\": string}", i)
		}
		var p ConfParam
		for k, v := range m {
			var dst *string
			switch k {
			case "name":
				dst = &p.Name
			case "value":
				dst = &p.Value
			default:
				return nil, plugin.ParamErrorf(AnnotationNetworkConf, "entry %d has unknown key %q, expected only \"name\" and \"value\"", i, k)
			}
			if err := json.Unmarshal(v, dst); err != nil {
				return nil, plugin.ParamErrorf(AnnotationNetworkConf, "entry %d: %q must be a JSON string", i, k)
			}
		}
		if p.Name == "" {
			return nil, plugin.ParamErrorf(AnnotationNetworkConf, "entry %d has no \"name\", expected {\"name\": string, \"value\": string}", i)
		}
		conf = append(conf, p)
	}
	return conf, nil
}

// EncodeConf returns the JSON form of c, as OKG writes it.
func EncodeConf(c Conf) (string, error) {
	if c == nil {
		c = Conf{}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode network-conf: %w", err)
	}
	return string(b), nil
}

// DecodeStatus parses a game.kruise.io/network-status value. "" decodes to nil, nil
// (no status yet). Malformed JSON, or JSON of the wrong shape, is a ParameterError
// whose Param is the annotation.
func DecodeStatus(s string) (*NetworkStatus, error) {
	if s == "" {
		return nil, nil
	}
	st := &NetworkStatus{}
	if err := strictUnmarshal(s, st); err != nil {
		return nil, &plugin.Error{Type: plugin.ParameterError, Param: AnnotationNetworkStatus,
			Message: "must be a JSON NetworkStatus object", Err: err}
	}
	return st, nil
}

// EncodeStatus returns the JSON form of st with OKG's field order and omitempty
// choices: fields in declaration order, "ip" always present, zero times as null.
func EncodeStatus(st NetworkStatus) (string, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode network-status: %w", err)
	}
	return string(b), nil
}

// strictUnmarshal decodes exactly one JSON value with no trailing data. Unknown object
// keys are allowed (OKG versions add fields), except where the caller checks them.
func strictUnmarshal(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	if _, err := dec.Token(); err == nil {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// ConfFromPod decodes the pod's network-conf annotation (DecodeConf); a pod without
// the annotation has an empty Conf.
func ConfFromPod(pod *corev1.Pod) (Conf, error) {
	return DecodeConf(pod.GetAnnotations()[AnnotationNetworkConf])
}

// IsReady reports whether pod's game.kruise.io/network-status says Ready (currentNetworkState
// Ready); false for a nil pod and for a missing or malformed status.
func IsReady(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	st, err := StatusFromPod(pod)
	return err == nil && st != nil && st.CurrentNetworkState == NetworkReady
}

// StatusFromPod decodes the pod's network-status annotation (DecodeStatus); nil, nil
// when the pod has none.
func StatusFromPod(pod *corev1.Pod) (*NetworkStatus, error) {
	return DecodeStatus(pod.GetAnnotations()[AnnotationNetworkStatus])
}

// SetStatus writes st to the pod's network-status annotation, with the times taken
// from prev (the status the pod carried before, nil for none) and now: CreateTime is
// prev's, or now when prev has none; LastTransitionTime is prev's when the
// CurrentNetworkState is unchanged, now otherwise. st's own times are ignored. Times
// have second precision (metav1.Time's RFC 3339 form), so rewriting an unchanged
// status gives the same bytes.
func SetStatus(pod *corev1.Pod, prev *NetworkStatus, st NetworkStatus, now time.Time) error {
	t := metav1.NewTime(now.Truncate(time.Second))
	st.CreateTime, st.LastTransitionTime = t, t
	if prev != nil {
		if !prev.CreateTime.IsZero() {
			st.CreateTime = prev.CreateTime
		}
		if prev.CurrentNetworkState == st.CurrentNetworkState && !prev.LastTransitionTime.IsZero() {
			st.LastTransitionTime = prev.LastTransitionTime
		}
	}
	s, err := EncodeStatus(st)
	if err != nil {
		return err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationNetworkStatus] = s
	return nil
}

// NetworkDisabled reports the pod's game.kruise.io/network-disabled label: false when
// absent, a ParameterError naming the label when it is not a strconv.ParseBool form.
func NetworkDisabled(pod *corev1.Pod) (bool, error) {
	v, ok := pod.GetLabels()[LabelNetworkDisabled]
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, plugin.ParamErrorf(LabelNetworkDisabled, "label value %q must be \"true\" or \"false\"", v)
	}
	return b, nil
}

// FirstRun is the first run of OKG's annotation plugins (the EIP ones, TencentCloud-CLB): a
// pod without a network-status, or with one that is not JSON, gets a Waiting one. It returns
// the status the pod carried (nil when it had none, and the run is then over) and an error:
// PutStatus's, or, at the first run, a network-conf that is not JSON (ConfFromPod's
// ParameterError), which the controller would never be asked for (OKG panics).
func FirstRun(pod *corev1.Pod) (*NetworkStatus, error) {
	prev, _ := StatusFromPod(pod)
	if prev != nil {
		return prev, nil
	}
	if err := PutStatus(pod, NetworkStatus{CurrentNetworkState: NetworkWaiting}); err != nil {
		return nil, err
	}
	_, err := ConfFromPod(pod)
	return nil, err
}

// NotReadyFrom returns a plugin run's NotReady exit for pod: it writes prev (the status the run
// started from: its addresses are kept, as OKG keeps them) with currentNetworkState NotReady,
// and returns the pod with err, or the encoding's error (PutStatus's) when that fails.
func NotReadyFrom(pod *corev1.Pod, prev NetworkStatus) func(err error) (*corev1.Pod, error) {
	return func(err error) (*corev1.Pod, error) {
		st := prev
		st.CurrentNetworkState = NetworkNotReady
		if werr := PutStatus(pod, st); werr != nil {
			return pod, werr
		}
		return pod, err
	}
}

// PutStatus encodes st into the pod's network-status annotation as it is (no times set:
// OKG's plugins write the struct they parsed). An encoding failure is an InternalError
// "write network status: <cause>".
func PutStatus(pod *corev1.Pod, st NetworkStatus) error {
	s, err := EncodeStatus(st)
	if err != nil {
		return plugin.Wrap(plugin.InternalError, err, "write network status")
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationNetworkStatus] = s
	return nil
}
