package plugin

import (
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// TestResultWriters: the provider tables' result_writers and result_writer_groups parse
// (flattened into the table), the default trusts kube-system's ServiceAccounts only, and a
// group that holds every tenant is refused, naming the key.
func TestResultWriters(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
[hwcloud]
enable = true
result_writers = ["system:serviceaccount:kube-system:yangtse"]
[volcengine]
enable = true
result_writer_groups = ["vke:network"]
[jdcloud]
enable = true
`))
	if err != nil {
		t.Fatal(err)
	}
	yangtse := authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:yangtse", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}
	other := authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:coredns", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}
	tenant := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	vke := authenticationv1.UserInfo{Username: "vke-agent", Groups: []string{"vke:network"}}
	for _, c := range []struct {
		name string
		w    ResultWriters
		user authenticationv1.UserInfo
		want bool
	}{
		{"hwcloud's user", cfg.HwCloud.ResultWriters, yangtse, true},
		{"hwcloud, another kube-system ServiceAccount (the default is replaced)", cfg.HwCloud.ResultWriters, other, false},
		{"hwcloud, a tenant", cfg.HwCloud.ResultWriters, tenant, false},
		{"volcengine's group", cfg.Volcengine.ResultWriters, vke, true},
		{"volcengine, a tenant", cfg.Volcengine.ResultWriters, tenant, false},
		{"jdcloud's default: kube-system", cfg.JdCloud.ResultWriters, other, true},
		{"jdcloud's default: a tenant", cfg.JdCloud.ResultWriters, tenant, false},
	} {
		if got := c.w.Trusts(c.user); got != c.want {
			t.Errorf("%s: Trusts = %v, want %v", c.name, got, c.want)
		}
	}
	_, err = ParseConfig([]byte("[jdcloud]\nenable = true\nresult_writer_groups = [\"system:authenticated\", \"\"]\n"))
	for _, want := range []string{`jdcloud.result_writer_groups[0] ("system:authenticated") holds every tenant`, "jdcloud.result_writer_groups[1] is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}
