package plugin

import (
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// ResultWriters names who may write the results a provider's network controller reports on
// pods (an EIP plugin's allocated-address annotations): the keys `result_writers` (usernames,
// such as "system:serviceaccount:kube-system:yangtse-agent") and `result_writer_groups` of a
// provider table, this project's addition (OKG takes a result from anyone who may edit the
// pod). A result annotation written by anyone else is put back by the webhook (it is not
// the controller's answer), since a pod author who could write it would publish another
// server's address as this game server's and open its readiness gate.
type ResultWriters struct {
	// Users are request usernames (request.userInfo.username) that may write the results.
	Users []string `toml:"result_writers"`
	// Groups are request groups (request.userInfo.groups) whose members may write them.
	Groups []string `toml:"result_writer_groups"`
}

// DefaultResultWriterGroup is the group trusted when a provider table names no result
// writer: every ServiceAccount of kube-system, where the clouds' network controllers run,
// and where only the platform creates pods (a pod there may use any of its ServiceAccounts).
// It is a group the API server's ServiceAccount authenticator adds itself
// (system:serviceaccounts:<namespace>, Kubernetes' "Service account permissions").
const DefaultResultWriterGroup = "system:serviceaccounts:kube-system"

// tooBroadGroups are groups that hold every tenant: naming one as a result writer would let
// any pod author forge results.
var tooBroadGroups = []string{"system:authenticated", "system:unauthenticated", "system:serviceaccounts"}

// Trusts reports whether a request by user may write the results: its username is in
// Users, or one of its groups is in Groups; with neither set, whether it is in
// DefaultResultWriterGroup.
func (w ResultWriters) Trusts(user authenticationv1.UserInfo) bool {
	groups := w.Groups
	if len(w.Users) == 0 && len(w.Groups) == 0 {
		groups = []string{DefaultResultWriterGroup}
	}
	if slices.Contains(w.Users, user.Username) {
		return true
	}
	for _, g := range user.Groups {
		if slices.Contains(groups, g) {
			return true
		}
	}
	return false
}

// validate checks w of the table named key ("hwcloud"): no empty entry, and no group that
// holds every tenant (tooBroadGroups); errors name the key and the entry.
func (w ResultWriters) validate(key string) []error {
	var errs []error
	for i, u := range w.Users {
		if u == "" {
			errs = append(errs, fmt.Errorf("%s.result_writers[%d] is empty, expected a username", key, i))
		}
	}
	for i, g := range w.Groups {
		switch {
		case g == "":
			errs = append(errs, fmt.Errorf("%s.result_writer_groups[%d] is empty, expected a group", key, i))
		case slices.Contains(tooBroadGroups, g):
			errs = append(errs, fmt.Errorf("%s.result_writer_groups[%d] (%q) holds every tenant: anyone could forge a result; expected the group of the cloud's network controller", key, i, g))
		}
	}
	return errs
}

// ResultReader is implemented by a plugin whose network-status reports what another
// controller writes on the pod (the EIP plugins: an allocated address in an annotation).
// Optional: the Plugin interface is OKG's and stays unchanged. The webhook takes a change of
// those annotations only from a writer the plugin trusts: at CREATE, and at an UPDATE that
// changes the network type, every one of them is dropped unless the request is a trusted
// writer's; at any other UPDATE (of the pod or of pods/status) a change by anyone else is
// put back to the stored value.
type ResultReader interface {
	// ResultAnnotations are the annotation keys the plugin reads as results.
	ResultAnnotations() []string
	// TrustsResultWriter reports whether a request by user may write them.
	TrustsResultWriter(user authenticationv1.UserInfo) bool
}
