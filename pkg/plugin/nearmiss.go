package plugin

import (
	"strings"
	"unicode/utf8"
)

// UnknownMetricLabel is the value of the plugin label of every metric for a network type
// that is not a registered plugin name: a pod author chooses the annotation's value, so the
// raw value would let anyone who can create a pod add time series without bound.
const UnknownMetricLabel = "unknown"

// MetricLabel returns the value of the plugin label of a metric for a pod whose
// game.kruise.io/network-type is networkType: the name itself when a plugin of that exact
// name is registered, UnknownMetricLabel otherwise (near-misses included).
func (r *Registry) MetricLabel(networkType string) string {
	if _, ok := r.byName[networkType]; ok {
		return networkType
	}
	return UnknownMetricLabel
}

// NearMiss returns the registered plugin name that networkType is a near-miss of, and
// whether there is one; networkType that is registered exactly is no near-miss. See
// NearMissOf for the rule.
func (r *Registry) NearMiss(networkType string) (string, bool) {
	if _, ok := r.byName[networkType]; ok {
		return "", false
	}
	return NearMissOf(networkType, r.names)
}

// NearMissOf returns the name of names that s is a near-miss of, and whether there is one.
// s is a near-miss of name when s != name and, after both are lower-cased (Unicode simple
// folding, strings.ToLower), their optimal string alignment distance (Damerau-Levenshtein
// restricted so that no substring is edited twice: one insertion, deletion, substitution
// or swap of two adjacent characters counts 1; see OSADistance) is at most
// MaxNearMissDistance(name). So a difference of case alone is always a near-miss. When s is
// a near-miss of several names, the closest wins, and among equally close ones the first
// in names.
//
// The distances are chosen for OKG's network type names, which are 14 to 27 characters
// long: the three Kubernetes-* names are at least 3 apart from each other, and OKG's cloud
// types (AlibabaCloud-SLB, AlibabaCloud-NLB, TencentCloud-CLB, HwCloud-ELB, ...) are far from
// all three, so that a cloud type is never taken for a typo of a Kubernetes one
// (TestNearMissOf pins this).
func NearMissOf(s string, names []string) (string, bool) {
	ls := strings.ToLower(s)
	best, bestDist := "", -1
	for _, name := range names {
		if name == s {
			continue
		}
		limit := MaxNearMissDistance(name)
		ln := strings.ToLower(name)
		if abs(utf8.RuneCountInString(ls)-utf8.RuneCountInString(ln)) > limit {
			continue // cheap bound: the distance is at least the difference in length
		}
		if d := OSADistance(ls, ln); d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = name, d
		}
	}
	return best, bestDist >= 0
}

// MaxNearMissDistance is the largest distance (after lower-casing) at which a string is a
// near-miss of name: 2 for names of 10 characters or more, 1 for 5 to 9, 0 (a difference of
// case only) below 5, so that short names do not attract unrelated words.
func MaxNearMissDistance(name string) int {
	switch n := utf8.RuneCountInString(name); {
	case n >= 10:
		return 2
	case n >= 5:
		return 1
	default:
		return 0
	}
}

// OSADistance returns the optimal string alignment distance between a and b, counted in
// runes: the fewest insertions, deletions, substitutions and swaps of two adjacent runes
// that turn a into b, where no substring is edited more than once (so "CA" to "ABC" is 3,
// not the unrestricted Damerau-Levenshtein 2). It takes O(len(a)*len(b)) time and
// O(len(b)) memory; NearMissOf calls it only for strings whose lengths differ by at most 2,
// and plugin names are short. (A 30-line function, so no dependency for it.)
func OSADistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows of the dynamic-programming table: i-2, i-1 and i.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
