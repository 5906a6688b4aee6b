package main

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitDocuments(t *testing.T) {
	cases := map[string]struct {
		data string
		// want is, per document, its index and kind, or "error".
		want []string
	}{
		"multi-document with blank and comment-only documents": {
			data: "# header\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n\n---\n# only a comment\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
			want: []string{"1 Namespace", "2 Pod"},
		},
		"JSON":                  {data: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`, want: []string{"1 Namespace"}},
		"not YAML":              {data: "kind: [unclosed\n", want: []string{"1 error"}},
		"a list, not an object": {data: "- a\n- b\n", want: []string{"1 error"}},
		"no kind":               {data: "apiVersion: v1\nmetadata: {name: a}\n", want: []string{"1 error"}},
		"null":                  {data: "null\n", want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, d := range splitDocuments("f.yaml", []byte(tc.data)) {
				kind := "error"
				if d.err == nil {
					kind = d.obj.GetKind()
				}
				got = append(got, fmt.Sprintf("%d %s", d.index, kind))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("documents (-want,+got):\n%s", diff)
			}
		})
	}
}
