package webhookconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// Names of the generated matchConditions. Condition names are the keys of the entries'
// matchConditions lists; the static ones in config/webhook/mutating_patch.yaml use the same
// names and expressions (for the built-in defaults), so that the controller replaces them
// rather than adding to them.
const (
	// ConditionSynchronousType (sync entry): the pod's network type may be Synchronous.
	ConditionSynchronousType = "synchronous-network-type"
	// ConditionCreateOrNetworkChange (sync entry): a CREATE, or an UPDATE that changes the
	// network-type or network-conf annotation (the only UPDATEs a Synchronous decision may
	// deny).
	ConditionCreateOrNetworkChange = "create-or-network-change"
	// ConditionNetworkTypeOrOwned (async entry): the pod carries a network type, or the
	// request brings, changes or removes one of the manager's own annotations
	// (podwebhook.OwnedAnnotationPrefix) whatever the type: a pod created with them, or an
	// UPDATE that drops the network type while it forges them, reaches the webhook, which
	// puts them back. A DELETE (its object is null) never matches, even under a webhook
	// configuration whose rules still list DELETE.
	ConditionNetworkTypeOrOwned = "network-type-or-owned-annotations"
	// ConditionNotSynchronous (async entry): what the sync entry does not match.
	ConditionNotSynchronous = "not-synchronous"
)

// MatchConditions returns the matchConditions of the sync and async entries for the
// network type modes (policy.Snapshot.NetworkTypeModes): a type is synchronous when it is in
// modes.Synchronous, or in a namespace of modes.SynchronousIn[type] (request.namespace is
// the pod's namespace). Every other type, registered or not, goes to the async entry: the
// webhook passes unregistered types through, so a manager that is down must not block them
// (OKG's cloud types), and a near-miss of a registered name goes with them (see
// policy.NetworkTypeModes). For every request at most one entry matches: sync when both of
// its conditions hold, async when its own hold, and the async entry's not-synchronous
// condition is the negation of the sync entry's conditions.
//
// The expressions cannot fail (the apiserver applies the entry's failurePolicy to an error,
// and under Fail that would block every pod): object and oldObject are null-checked (object
// is null on DELETE, oldObject on CREATE), and annotations are read only after has() and
// `in`; && and || absorb errors on the side they do not need.
func MatchConditions(modes policy.NetworkTypeModes) (sync, async []admissionregistrationv1.MatchCondition) {
	netType := annotation("object", networkstatus.AnnotationNetworkType)
	terms := []string{fmt.Sprintf("%s in %s", netType, celList(modes.Synchronous))}
	for _, t := range slices.Sorted(maps.Keys(modes.SynchronousIn)) {
		terms = append(terms, fmt.Sprintf("(%s == %s && request.namespace in %s)", netType, celString(t), celList(modes.SynchronousIn[t])))
	}
	anyTerm := terms[0]
	if len(terms) > 1 {
		anyTerm = "(" + strings.Join(terms, " || ") + ")"
	}
	isSync := fmt.Sprintf("%s && %s", hasAnnotation("object", networkstatus.AnnotationNetworkType), anyTerm)
	createOrChange := fmt.Sprintf("request.operation == 'CREATE' || (request.operation == 'UPDATE' && (%s != %s || %s != %s))",
		annotationOrEmpty("oldObject", networkstatus.AnnotationNetworkType), annotationOrEmpty("object", networkstatus.AnnotationNetworkType),
		annotationOrEmpty("oldObject", networkstatus.AnnotationNetworkConf), annotationOrEmpty("object", networkstatus.AnnotationNetworkConf))
	sync = []admissionregistrationv1.MatchCondition{
		{Name: ConditionSynchronousType, Expression: isSync},
		{Name: ConditionCreateOrNetworkChange, Expression: createOrChange},
	}
	async = []admissionregistrationv1.MatchCondition{
		{Name: ConditionNetworkTypeOrOwned, Expression: hasAnnotation("object", networkstatus.AnnotationNetworkType) + " || " + OwnedAnnotationsChange},
		{Name: ConditionNotSynchronous, Expression: fmt.Sprintf("!((%s) && (%s))", isSync, createOrChange)},
	}
	return sync, async
}

// OwnedAnnotationsChange is a CEL expression, true when the request's object is not null and
// carries an annotation under podwebhook.OwnedAnnotationPrefix that oldObject (null at
// CREATE) does not have with the same value, or oldObject has one that object lacks: a
// CREATE with one of the manager's own annotations, or an UPDATE that adds, changes or
// removes one. It cannot error. The pods/status entry's condition (StatusCondition) has the
// UPDATE half of it.
const OwnedAnnotationsChange = `(object != null && ((has(object.metadata.annotations) && ` +
	`object.metadata.annotations.exists(k, k.startsWith('` + podwebhook.OwnedAnnotationPrefix + `') && ` +
	`(oldObject == null || !has(oldObject.metadata.annotations) || !(k in oldObject.metadata.annotations) || ` +
	`oldObject.metadata.annotations[k] != object.metadata.annotations[k]))) || ` +
	`(oldObject != null && has(oldObject.metadata.annotations) && oldObject.metadata.annotations.exists(k, ` +
	`k.startsWith('` + podwebhook.OwnedAnnotationPrefix + `') && (!has(object.metadata.annotations) || !(k in object.metadata.annotations))))))`

// ConditionChangesGuarded is the pods/status entry's one condition (static, in
// config/webhook/mutating_patch.yaml, as StatusCondition returns it for every result
// annotation of the served plugins): see StatusCondition.
const ConditionChangesGuarded = "changes-guarded-annotations"

// StatusCondition returns the CEL expression of the pods/status entry's condition: true for
// an UPDATE (object and oldObject not null) that adds, changes or removes one of the
// manager's own annotations (podwebhook.OwnedAnnotationPrefix), the network type, or one of
// resultKeys (the result annotations of plugin.ResultReader plugins), so that the kubelet's
// status writes never call the webhook. The network type is among them so that a result
// written while the pod had another type (or none) is judged when the type comes back. It
// cannot error.
func StatusCondition(resultKeys []string) string {
	owned := `(has(object.metadata.annotations) && object.metadata.annotations.exists(k, ` +
		`k.startsWith('` + podwebhook.OwnedAnnotationPrefix + `') && (!has(oldObject.metadata.annotations) || ` +
		`!(k in oldObject.metadata.annotations) || oldObject.metadata.annotations[k] != object.metadata.annotations[k]))) || ` +
		`(has(oldObject.metadata.annotations) && oldObject.metadata.annotations.exists(k, ` +
		`k.startsWith('` + podwebhook.OwnedAnnotationPrefix + `') && (!has(object.metadata.annotations) || !(k in object.metadata.annotations))))`
	terms := []string{owned}
	// Both objects are not null here: a key is present in one and not the other, or present
	// in both with two values (the value comparison runs only when object has the key, and
	// then oldObject has it too or the presence test already answered).
	for _, k := range slices.Sorted(slices.Values(append([]string{networkstatus.AnnotationNetworkType}, resultKeys...))) {
		in := func(obj string) string {
			return fmt.Sprintf("(has(%s.metadata.annotations) && %s in %s.metadata.annotations)", obj, celString(k), obj)
		}
		terms = append(terms, fmt.Sprintf("%s != %s || (%s && %s != %s)", in("object"), in("oldObject"),
			in("object"), annotation("object", k), annotation("oldObject", k)))
	}
	return "object != null && oldObject != null && (" + strings.Join(terms, " || ") + ")"
}

// hasAnnotation is a CEL expression, true when obj is not null and has the annotation key.
func hasAnnotation(obj, key string) string {
	return fmt.Sprintf("(%s != null && has(%s.metadata.annotations) && %s in %s.metadata.annotations)", obj, obj, celString(key), obj)
}

// annotation is a CEL expression for the annotation key of obj; it fails unless
// hasAnnotation(obj, key) holds.
func annotation(obj, key string) string {
	return fmt.Sprintf("%s.metadata.annotations[%s]", obj, celString(key))
}

// annotationOrEmpty is a CEL expression for the annotation key of obj, or ” when obj is
// null or lacks it.
func annotationOrEmpty(obj, key string) string {
	return fmt.Sprintf("(%s ? %s : '')", hasAnnotation(obj, key), annotation(obj, key))
}

// celList is a CEL list literal of strings.
func celList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = celString(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// celString is a single-quoted CEL string literal of s.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`).Replace(s) + "'"
}
