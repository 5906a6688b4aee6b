package networkstatus

import (
	"errors"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// FuzzDecodeConf checks that any input either decodes to a Conf whose entries all
// have names and that re-encodes and decodes to itself, or fails with a
// parameterError naming the annotation; never a panic. Seeds: f.Add below and
// testdata/fuzz/FuzzDecodeConf.
func FuzzDecodeConf(f *testing.F) {
	for _, s := range []string{
		``, `[]`, `null`, `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`,
		`[{"name":"Annotation","value":"a: b"},{"name":"Fixed","value":"true"}]`,
		`{"name":"x"}`, `[{"name":1}]`, `[null]`, `[{}]`, `[{"name":"a","value":"\u0000"}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		conf, err := DecodeConf(s)
		if err != nil {
			var perr *plugin.Error
			if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param != AnnotationNetworkConf {
				t.Fatalf("DecodeConf(%q) error = %v, want parameterError naming the annotation", s, err)
			}
			return
		}
		for _, p := range conf {
			if p.Name == "" {
				t.Fatalf("DecodeConf(%q) accepted an entry without a name", s)
			}
		}
		enc, err := EncodeConf(conf)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeConf(enc)
		if err != nil || len(again) != len(conf) {
			t.Fatalf("re-decode of %q = %v, %v", enc, again, err)
		}
		for i := range conf {
			if again[i] != conf[i] {
				t.Fatalf("round trip changed entry %d: %+v -> %+v", i, conf[i], again[i])
			}
		}
	})
}

// FuzzDecodeStatus checks that any input either decodes to a status that encodes and
// decodes again without error, or fails with a parameterError naming the annotation.
func FuzzDecodeStatus(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`,
		`{"internalAddresses":[{"ip":"10.244.1.7","ports":[{"name":"game-7777","protocol":"UDP","port":7777}]}],"externalAddresses":[{"ip":"203.0.113.10","ports":[{"name":"game-7777","protocol":"UDP","port":8003}]}],"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`,
		`{"externalAddresses":[{"ip":"","endPoint":"a.example","ports":[{"name":"/p","port":"/p"}]}]}`,
		`{"createTime":"2025-03-01T12:00:00Z"}`, `[]`, `{"internalAddresses":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := DecodeStatus(s)
		if err != nil {
			var perr *plugin.Error
			if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param != AnnotationNetworkStatus {
				t.Fatalf("DecodeStatus(%q) error = %v, want parameterError naming the annotation", s, err)
			}
			return
		}
		if st == nil {
			return
		}
		enc, err := EncodeStatus(*st)
		if err != nil {
			t.Fatalf("EncodeStatus after decoding %q: %v", s, err)
		}
		if _, err := DecodeStatus(enc); err != nil {
			t.Fatalf("re-decode of %q: %v", enc, err)
		}
	})
}
