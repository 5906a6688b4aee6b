package networkstatus

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func readyHostPort() NetworkStatus {
	return NetworkStatus{
		InternalAddresses:   []NetworkAddress{{IP: "10.244.1.7", Ports: []NetworkPort{{Name: "game-7777", Protocol: corev1.ProtocolUDP, Port: IntPort(7777)}}}},
		ExternalAddresses:   []NetworkAddress{{IP: "203.0.113.10", Ports: []NetworkPort{{Name: "game-7777", Protocol: corev1.ProtocolUDP, Port: IntPort(8003)}}}},
		CurrentNetworkState: NetworkReady,
	}
}

func TestEncodeStatusGolden(t *testing.T) {
	strPort := intstr.FromString("/game0")
	cases := map[string]NetworkStatus{
		"hostport-ready": readyHostPort(),
		"hostport-ready-with-times": func() NetworkStatus {
			s := readyHostPort()
			s.NetworkType = "Kubernetes-HostPort"
			s.DesiredNetworkState = NetworkReady
			s.CreateTime = metav1.NewTime(t0)
			s.LastTransitionTime = metav1.NewTime(t0.Add(90 * time.Second))
			return s
		}(),
		"not-ready-empty": {CurrentNetworkState: NetworkNotReady},
		"ingress-endpoint-no-ip": {
			ExternalAddresses:   []NetworkAddress{{EndPoint: "game0.example.com", Ports: []NetworkPort{{Name: "/game0", Port: &strPort}}}},
			CurrentNetworkState: NetworkReady,
		},
		"port-range": {
			ExternalAddresses:   []NetworkAddress{{IP: "198.51.100.4", PortRange: &NetworkPortRange{Protocol: corev1.ProtocolTCP, PortRange: "8000-8009"}}},
			CurrentNetworkState: NetworkWaiting,
		},
	}
	for name, st := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := EncodeStatus(st)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("bytes (-want,+got):\n%s", diff)
			}
			back, err := DecodeStatus(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(st, *back); diff != "" {
				t.Errorf("round trip (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestEncodeStatusPinned spells out the example byte for byte, independent of
// the golden files.
func TestEncodeStatusPinned(t *testing.T) {
	got, err := EncodeStatus(readyHostPort())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"internalAddresses":[{"ip":"10.244.1.7","ports":[{"name":"game-7777","protocol":"UDP","port":7777}]}],` +
		`"externalAddresses":[{"ip":"203.0.113.10","ports":[{"name":"game-7777","protocol":"UDP","port":8003}]}],` +
		`"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bytes (-want,+got):\n%s", diff)
	}
}

func TestDecodeStatus(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    *NetworkStatus
		wantErr bool
	}{
		"empty means none":       {in: ""},
		"OKG not ready":          {in: `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`, want: &NetworkStatus{CurrentNetworkState: NetworkNotReady}},
		"unknown fields kept":    {in: `{"currentNetworkState":"Ready","future":1}`, want: &NetworkStatus{CurrentNetworkState: NetworkReady}},
		"string port":            {in: `{"externalAddresses":[{"ip":"","ports":[{"name":"p","port":"/x"}]}]}`, want: &NetworkStatus{ExternalAddresses: []NetworkAddress{{Ports: []NetworkPort{{Name: "p", Port: func() *intstr.IntOrString { v := intstr.FromString("/x"); return &v }()}}}}}},
		"not JSON":               {in: `{currentNetworkState: Ready}`, wantErr: true},
		"list instead of object": {in: `[]`, wantErr: true},
		"wrong type":             {in: `{"internalAddresses":"10.0.0.1"}`, wantErr: true},
		"trailing data":          {in: `{} {}`, wantErr: true},
		"bad time":               {in: `{"createTime":"yesterday"}`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeStatus(tc.in)
			if tc.wantErr {
				assertParamError(t, err, AnnotationNetworkStatus)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}

func assertParamError(t *testing.T, err error, param string) {
	t.Helper()
	var perr *plugin.Error
	if !errors.As(err, &perr) {
		t.Fatalf("error = %v (%T), want *plugin.Error", err, err)
	}
	if perr.Type != plugin.ParameterError || perr.Param != param || perr.Warning {
		t.Errorf("error = %+v, want a parameterError naming %s", perr, param)
	}
	if !strings.Contains(perr.Error(), param) {
		t.Errorf("message %q does not name %s", perr.Error(), param)
	}
}

func TestDecodeConf(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    Conf
		wantErr bool
	}{
		"absent":          {in: ""},
		"null":            {in: "null", want: Conf{}},
		"empty":           {in: "[]", want: Conf{}},
		"two":             {in: `[{"name":"ContainerPorts","value":"game:7777/UDP"},{"name":"Fixed","value":"true"}]`, want: Conf{{"ContainerPorts", "game:7777/UDP"}, {"Fixed", "true"}}},
		"repeated":        {in: `[{"name":"Annotation","value":"a: b"},{"name":"Annotation","value":"c: d"}]`, want: Conf{{"Annotation", "a: b"}, {"Annotation", "c: d"}}},
		"no value":        {in: `[{"name":"Fixed"}]`, want: Conf{{Name: "Fixed"}}},
		"not JSON":        {in: `ContainerPorts=game:7777`, wantErr: true},
		"object":          {in: `{"name":"a","value":"b"}`, wantErr: true},
		"list of strings": {in: `["a"]`, wantErr: true},
		"number value":    {in: `[{"name":"Port","value":80}]`, wantErr: true},
		"missing name":    {in: `[{"value":"x"}]`, wantErr: true},
		"null entry":      {in: `[null]`, wantErr: true},
		"unknown key":     {in: `[{"name":"a","value":"b","Value":"c"}]`, wantErr: true},
		"trailing":        {in: `[] x`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeConf(tc.in)
			if tc.wantErr {
				assertParamError(t, err, AnnotationNetworkConf)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conf (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestEncodeConf(t *testing.T) {
	got, err := EncodeConf(Conf{{"PortProtocols", "80/TCP"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`[{"name":"PortProtocols","value":"80/TCP"}]`, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if got, _ := EncodeConf(nil); got != "[]" {
		t.Errorf("EncodeConf(nil) = %s, want []", got)
	}
}

func TestSetStatus(t *testing.T) {
	later := t0.Add(time.Minute + 500*time.Millisecond)
	notReadyAtT0 := &NetworkStatus{CurrentNetworkState: NetworkNotReady, CreateTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)}
	cases := map[string]struct {
		prev     *NetworkStatus
		st       NetworkStatus
		wantTime [2]time.Time // create, transition
	}{
		"first status":      {st: NetworkStatus{CurrentNetworkState: NetworkNotReady}, wantTime: [2]time.Time{later.Truncate(time.Second), later.Truncate(time.Second)}},
		"same state keeps":  {prev: notReadyAtT0, st: NetworkStatus{CurrentNetworkState: NetworkNotReady}, wantTime: [2]time.Time{t0, t0}},
		"transition":        {prev: notReadyAtT0, st: NetworkStatus{CurrentNetworkState: NetworkReady}, wantTime: [2]time.Time{t0, later.Truncate(time.Second)}},
		"own times ignored": {prev: notReadyAtT0, st: NetworkStatus{CurrentNetworkState: NetworkNotReady, CreateTime: metav1.NewTime(later)}, wantTime: [2]time.Time{t0, t0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{}
			if err := SetStatus(pod, tc.prev, tc.st, later); err != nil {
				t.Fatal(err)
			}
			got, err := StatusFromPod(pod)
			if err != nil {
				t.Fatal(err)
			}
			if !got.CreateTime.Time.Equal(tc.wantTime[0]) || !got.LastTransitionTime.Time.Equal(tc.wantTime[1]) {
				t.Errorf("times = %v, %v; want %v, %v", got.CreateTime, got.LastTransitionTime, tc.wantTime[0], tc.wantTime[1])
			}
		})
	}
}

func TestNetworkDisabled(t *testing.T) {
	cases := map[string]struct {
		labels  map[string]string
		want    bool
		wantErr bool
	}{
		"absent": {},
		"true":   {labels: map[string]string{LabelNetworkDisabled: "true"}, want: true},
		"false":  {labels: map[string]string{LabelNetworkDisabled: "false"}},
		"bad":    {labels: map[string]string{LabelNetworkDisabled: "yes"}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := NetworkDisabled(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}})
			if tc.wantErr {
				assertParamError(t, err, LabelNetworkDisabled)
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("NetworkDisabled = %t, %v; want %t", got, err, tc.want)
			}
		})
	}
}

// TestConfLast: the last entry of a name counts; a missing name is reported.
func TestConfLast(t *testing.T) {
	c := Conf{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "A", Value: "3"}}
	if v, ok := c.Last("A"); !ok || v != "3" {
		t.Errorf("Last(A) = %q, %t; want 3, true", v, ok)
	}
	if _, ok := c.Last("C"); ok {
		t.Error("Last(C) found a value")
	}
}
