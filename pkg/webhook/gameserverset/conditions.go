package gameserverset

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// NetworkTypeIn returns a CEL expression, for a webhook's matchConditions, that is true when
// the GameServerSet variable o (object or oldObject) has a spec.network.networkType equal to
// one of types (sorted, so that every replica writes the same bytes). It cannot error on any
// object: each field is checked with has() and its type before it is read, and o is compared
// with null first.
func NetworkTypeIn(o string, types []string) string {
	names := slices.Clone(types)
	slices.Sort(names)
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("(%[1]s != null && has(%[1]s.spec) && type(%[1]s.spec) == map && has(%[1]s.spec.network) && type(%[1]s.spec.network) == map && "+
		"has(%[1]s.spec.network.networkType) && %[1]s.spec.network.networkType in [%[2]s])", o, strings.Join(quoted, ", "))
}

// networkOf is a CEL expression for o's spec.network, or null when it has none.
func networkOf(o string) string {
	return fmt.Sprintf("((%[1]s != null && has(%[1]s.spec) && type(%[1]s.spec) == map && has(%[1]s.spec.network)) ? %[1]s.spec.network : null)", o)
}

// MatchConditions are the matchConditions of this manager's entry (WebhookName) for the
// network types served: the entry is called only for a GameServerSet whose new or old
// networkType is served here, and only on CREATE or when spec.network changes, so that a
// scale or an image update never waits for this manager. config/webhook/validating_patch.yaml
// holds them for the Kubernetes plugins (TestConfigHoldsTheMatchConditions).
func MatchConditions(served []string) []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{
		{Name: "served-network-type", Expression: NetworkTypeIn("object", served) + " || " + NetworkTypeIn("oldObject", served)},
		{Name: "create-or-network-change", Expression: "request.operation == 'CREATE' || " + networkOf("oldObject") + " != " + networkOf("object")},
	}
}
