// Package okgvalidation keeps one matchCondition of this manager's on OpenKruise Game's
// GameServerSet validating webhook entry, the one object of another product the manager
// writes. OKG's entry (vgameserverset.kb.io in the ValidatingWebhookConfiguration
// kruise-game-validating-webhook, failurePolicy Fail) refuses every GameServerSet CREATE whose
// spec.network.networkType is not a plugin OKG has registered; with OKG's Kubernetes provider
// off, as this manager requires, that is every GameServerSet of the types this manager serves.
// The condition makes the API server skip OKG's entry for exactly the GameServerSets whose new
// and old networkType are both served here (a CREATE has no old object); every other
// GameServerSet write still reaches OKG. This manager's own entry validates the skipped ones
// (pkg/webhook/gameserverset). OKG replaces its entries at every start, dropping the
// condition; the Reconciler puts it back.
package okgvalidation

import (
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/webhook/gameserverset"
)

// OKG's names, from kruise-game-manager at commit d76ace2 (its webhook set-up writes them at
// every start): the ValidatingWebhookConfiguration and its GameServerSet entry.
const (
	DefaultConfiguration = "kruise-game-validating-webhook"
	EntryName            = "vgameserverset.kb.io"
)

// ConditionName is the name of this manager's matchCondition on OKG's entry: a qualified
// name whose prefix says whose it is (matchCondition names allow a DNS-subdomain prefix).
const ConditionName = "network-plugin-policy.game.kruise.io/skip-served-network-types"

// Condition returns the matchCondition that skips OKG's entry for GameServerSets whose
// networkType, and on UPDATE the old object's too, is one of served (plugin names, exact and
// case-sensitive as OKG compares them). The expression cannot error on any object: every
// field is checked with has() and its type before it is read, because under OKG's
// failurePolicy Fail an erroring condition would refuse every GameServerSet write in the
// cluster. served must not be empty (the condition is removed instead).
func Condition(served []string) admissionregistrationv1.MatchCondition {
	expr := fmt.Sprintf("!(%s && (oldObject == null || %s))",
		gameserverset.NetworkTypeIn("object", served), gameserverset.NetworkTypeIn("oldObject", served))
	return admissionregistrationv1.MatchCondition{Name: ConditionName, Expression: expr}
}

// WithCondition returns the matchConditions of an entry with this manager's condition for
// served in place of any earlier one of its name (or without it when served is empty), the
// others kept in their order, and whether that differs from conds.
func WithCondition(conds []admissionregistrationv1.MatchCondition, served []string) ([]admissionregistrationv1.MatchCondition, bool) {
	out := make([]admissionregistrationv1.MatchCondition, 0, len(conds)+1)
	for _, c := range conds {
		if c.Name != ConditionName {
			out = append(out, c)
		}
	}
	if len(served) > 0 {
		out = append(out, Condition(served))
	}
	return out, !slices.Equal(out, conds)
}

// HasCondition reports whether conds hold this manager's condition for served, as Condition
// writes it.
func HasCondition(conds []admissionregistrationv1.MatchCondition, served []string) bool {
	return len(served) > 0 && slices.Contains(conds, Condition(served))
}
