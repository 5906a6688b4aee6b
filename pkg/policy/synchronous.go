package policy

import (
	"slices"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// SynchronousTypes returns the sorted network types (values of the pod annotation
// game.kruise.io/network-type) whose CREATE some root-namespace policy of the snapshot, or
// the plugin's built-in mode, may decide Synchronous in every namespace (NetworkTypeModes
// also gives the types that only some namespaces' own policies may decide Synchronous).
// Only registered plugins count: the webhook passes every other type through untouched, and
// a near-miss of a registered name (a parameterError the policy decides) is left to the
// failurePolicy Ignore entry too (see NetworkTypeModes). The mutating webhook
// configuration's failurePolicy Fail entry covers these types (see
// pkg/controller/webhookconfig); a type that is left out can be admitted without the webhook
// and caught up later.
//
// The answer errs on the side of Synchronous, since leaving out a type that can be
// Synchronous would admit its pods without their network while no webhook answers:
//   - a policy counts when its spec.plugins lists the plugin's name, its alias or "*" and it
//     sets failureMode: Synchronous or a failureModeExpression (whatever its selectors and
//     matchConditions, which are not evaluated here);
//   - a namespace policy that sets the failure group at all (failureMode Asynchronous
//     included) counts when a root-namespace policy listing the plugin has spec.bounds
//     failureModes [Synchronous]: the resolver caps that namespace policy's decision to
//     Synchronous (whatever the bound's selectors, which are not evaluated here);
//   - the built-in mode counts when it is Synchronous, unless a root-namespace policy that
//     selects every pod (no podSelector, no matchConditions, a namespaceSelector that is
//     absent or empty) sets failureMode: Asynchronous without an expression for the plugin:
//     then every pod's failure group comes from a policy and the built-in mode never
//     applies.
//
// Only policies that compiled (Ready) are in a snapshot.
func (s *Snapshot) SynchronousTypes(plugins []Plugin) []string {
	return s.NetworkTypeModes(plugins).Synchronous
}

// NetworkTypeModes splits the registered plugins' network types by whether a CREATE may be
// decided Synchronous (see SynchronousTypes), in every namespace or only in some.
//
// Every other network type is Asynchronous for the webhook configuration, whatever the
// policies say: a type that is neither registered nor a near-miss is passed through by the
// webhook, so it must never wait for (or be refused by the absence of) the manager, as OKG's
// cloud types must not; and a near-miss (kubernetes-hostport) cannot be told apart from such
// a type in a matchCondition without listing every misspelling. So a near-miss admitted
// while no replica answers is admitted untouched, like any unknown type (the catch-up
// controller leaves it alone too); while the manager runs, the webhook decides it.
type NetworkTypeModes struct {
	// Synchronous are the sorted registered names that may be Synchronous in every namespace.
	Synchronous []string
	// Asynchronous are the sorted registered names that are not Synchronous everywhere:
	// never, or only in the namespaces of SynchronousIn.
	Asynchronous []string
	// SynchronousIn maps a type of Asynchronous to the sorted namespaces whose own policies
	// may decide it Synchronous. A policy outside the root namespace selects only pods of its
	// own namespace, so one tenant's Synchronous policy does not put every namespace's pods
	// of that type behind the failurePolicy Fail entry. Nil when there are none.
	SynchronousIn map[string][]string
}

// NetworkTypeModes returns the modes of the registered plugins' network types (see
// SynchronousTypes for the rules). Policy entries that name no registered plugin or alias
// play no part.
func (s *Snapshot) NetworkTypeModes(plugins []Plugin) NetworkTypeModes {
	var m NetworkTypeModes
	named := map[string]bool{}
	for _, p := range plugins {
		if named[p.Name] {
			continue
		}
		named[p.Name] = true
		everywhere, namespaces := s.maySynchronous(p)
		if everywhere {
			m.Synchronous = append(m.Synchronous, p.Name)
			continue
		}
		m.Asynchronous = append(m.Asynchronous, p.Name)
		if len(namespaces) > 0 {
			if m.SynchronousIn == nil {
				m.SynchronousIn = map[string][]string{}
			}
			m.SynchronousIn[p.Name] = namespaces
		}
	}
	slices.Sort(m.Synchronous)
	slices.Sort(m.Asynchronous)
	return m
}

// Without returns m without the network types drop reports: they are then like every other
// type, Asynchronous for the webhook configuration (an entry whose webhook passes them
// through). m is not changed.
func (m NetworkTypeModes) Without(drop func(networkType string) bool) NetworkTypeModes {
	keep := func(types []string) []string {
		return slices.DeleteFunc(slices.Clone(types), drop)
	}
	out := NetworkTypeModes{Synchronous: keep(m.Synchronous), Asynchronous: keep(m.Asynchronous)}
	for t, ns := range m.SynchronousIn {
		if !drop(t) {
			if out.SynchronousIn == nil {
				out.SynchronousIn = map[string][]string{}
			}
			out.SynchronousIn[t] = ns
		}
	}
	return out
}

// maySynchronous reports whether a CREATE of a pod with plugin p may be decided
// Synchronous in every namespace (a root-namespace policy, or the plugin's built-in mode)
// and, if not, the sorted namespaces whose own policies may decide it Synchronous.
func (s *Snapshot) maySynchronous(p Plugin) (everywhere bool, namespaces []string) {
	builtIn := p.Synchronous
	forced := s.boundForcesSynchronous(p)
	for ns, idx := range s.namespaces {
		for _, cp := range idx.listing(p) {
			if !cp.setsFailure || cp.audit {
				continue
			}
			if cp.failureModeExpr != nil || (cp.failureMode != nil && *cp.failureMode == v1alpha1.FailureModeSynchronous) ||
				(forced && ns != s.rootNamespace) {
				if ns == s.rootNamespace {
					return true, nil
				}
				if !slices.Contains(namespaces, ns) {
					namespaces = append(namespaces, ns)
				}
				continue
			}
			if ns == s.rootNamespace && cp.selectsEveryPod() {
				builtIn = false
			}
		}
	}
	if builtIn {
		return true, nil
	}
	slices.Sort(namespaces)
	return false, namespaces
}

// boundForcesSynchronous reports whether a root-namespace policy whose spec.plugins lists p
// bounds namespace policies to failureModes [Synchronous]: every namespace policy's failure
// decision for p is then capped to Synchronous (clamp).
func (s *Snapshot) boundForcesSynchronous(p Plugin) bool {
	root, ok := s.namespaces[s.rootNamespace]
	if !ok {
		return false
	}
	for _, cp := range root.listing(p) {
		if b := cp.bounds; b != nil && !cp.audit && len(b.failureModes) == 1 && b.failureModes[0] == v1alpha1.FailureModeSynchronous {
			return true
		}
	}
	return false
}

// listing returns the policies of the index whose spec.plugins lists p by name, by alias
// or with "*"; a policy may appear more than once.
func (idx *namespaceIndex) listing(p Plugin) []*CompiledPolicy {
	out := slices.Clone(idx.byPlugin[p.Name])
	if p.Alias != "" && p.Alias != p.Name {
		out = append(out, idx.byPlugin[p.Alias]...)
	}
	return append(out, idx.wildcard...)
}

// selectsEveryPod reports whether the policy matches every pod of every namespace it
// applies to: no podSelector (or an empty one), no namespaceSelector (or an empty one) and
// no matchConditions.
func (p *CompiledPolicy) selectsEveryPod() bool {
	return (p.podSelector == nil || p.podSelector.Empty()) &&
		(p.namespaceSelector == nil || p.namespaceSelector.Empty()) &&
		len(p.conditions) == 0
}
