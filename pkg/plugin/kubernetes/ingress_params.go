package kubernetes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// Ingress parameters, OKG's names. Path, PathType and Port may repeat (the n-th Path
// uses the n-th PathType and Port, or the first when there are fewer); Annotation may
// repeat; the others are given at most once.
const (
	ParamPath             = "Path"
	ParamPathType         = "PathType"
	ParamPort             = "Port"
	ParamHost             = "Host"
	ParamIngressClassName = "IngressClassName"
	ParamTLSHosts         = "TlsHosts"
	ParamTLSSecretName    = "TlsSecretName"
	ParamAnnotation       = "Annotation"
)

// idPlaceholder in Path or Host is replaced by the pod's ordinal (the number after the
// last "-" of its name).
const idPlaceholder = "<id>"

// ingressParams is the parsed network-conf of an Ingress pod; paths and host still
// contain the <id> placeholder.
type ingressParams struct {
	paths            []string
	pathTypes        []networkingv1.PathType
	ports            []int32
	host             string
	ingressClassName *string
	tlsHosts         []string
	tlsSecretName    string
	annotations      map[string]string
	annotationKeys   []string // in order, for the canonical form
	fixed            bool
}

// canonicalPorts is the string the Service hash is computed from.
func (p ingressParams) canonicalPorts() string {
	return fmt.Sprint(p.ports, p.fixed)
}

// canonical is the string the Ingress hash is computed from (after <id> expansion).
func (p ingressParams) canonical() string {
	var b strings.Builder
	fmt.Fprintf(&b, "paths=%q types=%q ports=%v host=%q tls=%q/%q fixed=%t class=", p.paths, p.pathTypes, p.ports, p.host, p.tlsHosts, p.tlsSecretName, p.fixed)
	if p.ingressClassName != nil {
		b.WriteString(strconv.Quote(*p.ingressClassName))
	}
	for _, k := range p.annotationKeys {
		fmt.Fprintf(&b, " %q=%q", k, p.annotations[k])
	}
	return b.String()
}

// pathAt returns the i-th path's type and port, padding with the first.
func (p ingressParams) pathAt(i int) (networkingv1.PathType, int32) {
	t, port := p.pathTypes[0], p.ports[0]
	if i < len(p.pathTypes) {
		t = p.pathTypes[i]
	}
	if i < len(p.ports) {
		port = p.ports[i]
	}
	return t, port
}

// parseIngressParams parses Ingress's network-conf under the provider config's
// [kubernetes.ingress] guardrails. Errors are ParameterErrors naming the parameter: no
// Path, no PathType or Port, a Path or Host with more than one <id>, a PathType other
// than Exact/Prefix/ImplementationSpecific, a bad Port, an Annotation without ": ", an
// Annotation key or a Host / TlsHosts entry that guard refuses (checkAnnotationKey,
// checkHost), a repeated single-valued parameter, a non-boolean Fixed. Warnings
// (returned with the params): unknown parameters; neither Path nor Host containing <id>
// (every pod would get the same route).
func parseIngressParams(conf networkstatus.Conf, guard plugin.IngressConfig) (ingressParams, error) {
	p := ingressParams{annotations: map[string]string{}}
	p.paths = conf.Values(ParamPath)
	if len(p.paths) == 0 {
		return ingressParams{}, plugin.ParamErrorf(ParamPath, `is required, expected a URL path such as "/game<id>(/|$)(.*)" with at most one %s`, idPlaceholder)
	}
	for _, path := range p.paths {
		if n := strings.Count(path, idPlaceholder); n > 1 {
			return ingressParams{}, plugin.ParamErrorf(ParamPath, "value %q has %d %s placeholders, expected at most one", path, n, idPlaceholder)
		}
		if !strings.HasPrefix(path, "/") {
			return ingressParams{}, plugin.ParamErrorf(ParamPath, "value %q must start with \"/\"", path)
		}
	}
	for _, v := range conf.Values(ParamPathType) {
		switch t := networkingv1.PathType(v); t {
		case networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
			p.pathTypes = append(p.pathTypes, t)
		default:
			return ingressParams{}, plugin.ParamErrorf(ParamPathType, "value %q is not one of Exact, Prefix, ImplementationSpecific", v)
		}
	}
	if len(p.pathTypes) == 0 {
		return ingressParams{}, plugin.ParamErrorf(ParamPathType, "is required, expected Exact, Prefix or ImplementationSpecific")
	}
	for _, v := range conf.Values(ParamPort) {
		port, err := parsePort(v)
		if err != nil {
			return ingressParams{}, plugin.ParamErrorf(ParamPort, "%v", err)
		}
		p.ports = append(p.ports, port)
	}
	if len(p.ports) == 0 {
		return ingressParams{}, plugin.ParamErrorf(ParamPort, "is required, expected the pod port (1-65535) the paths lead to")
	}
	var err error
	if p.host, err = singleParam(conf, ParamHost); err != nil {
		return ingressParams{}, err
	}
	if n := strings.Count(p.host, idPlaceholder); n > 1 {
		return ingressParams{}, plugin.ParamErrorf(ParamHost, "value %q has %d %s placeholders, expected at most one", p.host, n, idPlaceholder)
	}
	if len(conf.Values(ParamIngressClassName)) > 0 {
		v, err := singleParam(conf, ParamIngressClassName)
		if err != nil {
			return ingressParams{}, err
		}
		p.ingressClassName = &v
	}
	if p.tlsSecretName, err = singleParam(conf, ParamTLSSecretName); err != nil {
		return ingressParams{}, err
	}
	tlsHosts, err := singleParam(conf, ParamTLSHosts)
	if err != nil {
		return ingressParams{}, err
	}
	if tlsHosts != "" {
		p.tlsHosts = strings.Split(tlsHosts, ",")
	}
	for _, v := range conf.Values(ParamAnnotation) {
		k, val, ok := strings.Cut(v, ": ")
		if !ok || k == "" {
			return ingressParams{}, plugin.ParamErrorf(ParamAnnotation, "value %q is not of the form \"<key>: <value>\" (a colon and a space)", v)
		}
		if err := checkAnnotationKey(k, guard); err != nil {
			return ingressParams{}, err
		}
		if _, dup := p.annotations[k]; !dup {
			p.annotationKeys = append(p.annotationKeys, k)
		}
		p.annotations[k] = val
	}
	if p.fixed, err = parseBoolParam(conf, ParamFixed); err != nil {
		return ingressParams{}, err
	}
	if p.host == "" && !guard.AllowCatchAllHost && len(guard.AllowedHostSuffixes) == 0 {
		return ingressParams{}, plugin.NotAllowedf(ParamHost, "is required: an Ingress rule without host serves every host (a catch-all), expected a host such as \"play<id>.games.example.com\" (kubernetes.ingress.allow_catch_all_host = true allows a catch-all)")
	}
	if !guard.AllowCatchAllHost {
		for _, h := range append([]string{p.host}, p.tlsHosts...) {
			if strings.HasPrefix(h, "*") {
				param := ParamHost
				if h != p.host {
					param = ParamTLSHosts
				}
				return ingressParams{}, plugin.NotAllowedf(param, "wildcard host %q serves every name under it (a catch-all for them), expected one host (kubernetes.ingress.allow_catch_all_host = true allows it)", h)
			}
		}
	}
	if err := checkHost(ParamHost, p.host, guard); err != nil {
		return ingressParams{}, err
	}
	for _, h := range p.tlsHosts {
		if err := checkHost(ParamTLSHosts, h, guard); err != nil {
			return ingressParams{}, err
		}
	}

	var warns []error
	if w := unknownParams(IngressName, conf, ParamPath, ParamPathType, ParamPort, ParamHost, ParamIngressClassName,
		ParamTLSHosts, ParamTLSSecretName, ParamAnnotation, ParamFixed); w != nil {
		warns = append(warns, w)
	}
	if !strings.Contains(p.host, idPlaceholder) && !slices.ContainsFunc(p.paths, func(s string) bool { return strings.Contains(s, idPlaceholder) }) {
		warns = append(warns, &plugin.Error{Type: plugin.ParameterError, Param: ParamPath, Warning: true,
			Message: "neither Path nor Host contains " + idPlaceholder + ": every pod of the workload gets the same route"})
	}
	return p, joinWarnings(warns...)
}

// singleParam returns the value of a parameter given at most once ("" when absent).
func singleParam(conf networkstatus.Conf, name string) (string, error) {
	values := conf.Values(name)
	switch len(values) {
	case 0:
		return "", nil
	case 1:
		return values[0], nil
	default:
		return "", plugin.ParamErrorf(name, "is given %d times, expected once", len(values))
	}
}

// joinWarnings merges warning-level *Errors into one (nil for none).
func joinWarnings(warns ...error) error {
	switch len(warns) {
	case 0:
		return nil
	case 1:
		return warns[0]
	}
	var params, msgs []string
	for _, w := range warns {
		e := plugin.AsError(w)
		params = append(params, e.Param)
		msgs = append(msgs, e.Message)
	}
	return &plugin.Error{Type: plugin.ParameterError, Param: strings.Join(params, ","), Warning: true, Message: strings.Join(msgs, "; ")}
}

// podOrdinal returns the number after the last "-" of the pod name (OKG's
// GetIndexFromGsName), or a ParameterError naming param when there is none.
func podOrdinal(name, param string) (int, error) {
	i := strings.LastIndex(name, "-")
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil || n < 0 {
		return 0, plugin.ParamErrorf(param, "uses %s but pod name %q does not end in \"-<number>\"", idPlaceholder, name)
	}
	return n, nil
}

// expand returns the params with <id> replaced by the pod's ordinal.
func (p ingressParams) expand(podName string) (ingressParams, error) {
	out := p
	out.paths = slices.Clone(p.paths)
	for i, path := range out.paths {
		if strings.Contains(path, idPlaceholder) {
			id, err := podOrdinal(podName, ParamPath)
			if err != nil {
				return ingressParams{}, err
			}
			out.paths[i] = strings.Replace(path, idPlaceholder, strconv.Itoa(id), 1)
		}
	}
	if strings.Contains(p.host, idPlaceholder) {
		id, err := podOrdinal(podName, ParamHost)
		if err != nil {
			return ingressParams{}, err
		}
		out.host = strings.Replace(p.host, idPlaceholder, strconv.Itoa(id), 1)
	}
	return out, nil
}

// snippetSuffix ends the annotation keys refused by default: ingress-nginx's
// configuration-snippet, server-snippet, auth-snippet, stream-snippet, ... and keys of
// the same style from other controllers, which inject raw controller configuration.
const snippetSuffix = "-snippet"

// checkAnnotationKey returns a ParameterError (param Annotation) naming key when the
// provider config refuses it: with no allowed_annotations, a key of an injection family
// (injectionFamily); with allowed_annotations, a key no entry matches (an exact key, or a
// prefix ending in "*"), and a key of an injection family that is not listed exactly.
func checkAnnotationKey(key string, guard plugin.IngressConfig) error {
	family := injectionFamily(key)
	if guard.AllowedAnnotations == nil {
		if family != "" {
			return plugin.NotAllowedf(ParamAnnotation, "Annotation %q is not allowed by the Ingress provider config (%s are refused by default)", key, family)
		}
		return nil
	}
	for _, a := range guard.AllowedAnnotations {
		if a == key {
			return nil
		}
		if prefix, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(key, prefix) && family == "" {
			return nil
		}
	}
	if family != "" {
		return plugin.NotAllowedf(ParamAnnotation, "Annotation %q is not allowed by the Ingress provider config (%s are refused unless kubernetes.ingress.allowed_annotations lists the exact key)", key, family)
	}
	return plugin.NotAllowedf(ParamAnnotation, "Annotation %q is not allowed by the Ingress provider config (kubernetes.ingress.allowed_annotations: %q)", key, guard.AllowedAnnotations)
}

// injectionFamily names the family of annotation keys that let whoever writes them inject
// configuration into, or send requests through, a shared ingress controller, "" when key is
// not of one. Compared without case, on the name after the key's prefix (any controller's
// prefix: "nginx.ingress.kubernetes.io/", "haproxy.org/", ...):
//   - names ending in "-snippet" (configuration-snippet, server-snippet, auth-snippet, ...);
//   - auth-url and auth-signin (the external authentication URL is put into the
//     controller's configuration; CVE-2025-24514);
//   - names starting with "auth-tls-" (auth-tls-match-cn, CVE-2025-1097);
//   - names starting with "mirror-" (mirror-target, mirror-host, CVE-2025-1098);
//   - server-alias (extra server names: hosts the catch-all and cross-namespace host checks
//     would not see).
//
// These are the ingress-nginx annotation injections of 2025 (IngressNightmare, with
// CVE-2025-1974) and the snippet class before them.
func injectionFamily(key string) string {
	name := strings.ToLower(key)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	switch {
	case strings.HasSuffix(name, snippetSuffix):
		return "keys ending in " + snippetSuffix
	case name == "auth-url" || name == "auth-signin":
		return "auth-url and auth-signin"
	case strings.HasPrefix(name, "auth-tls-"):
		return "auth-tls-* keys"
	case strings.HasPrefix(name, "mirror-"):
		return "mirror-* keys"
	case name == "server-alias":
		return "server-alias (it adds hosts that the host checks do not see)"
	}
	return ""
}

// checkHost returns a ParameterError naming param (Host or TlsHosts) and host when the
// provider config's allowed_host_suffixes is set and host (its <id> placeholder read as
// a digit) is not one of the suffixes or a name under one, compared without case; an
// empty Host is refused then too, since a rule without host matches every host. With no
// allowed_host_suffixes every host passes, as in OKG.
func checkHost(param, host string, guard plugin.IngressConfig) error {
	if len(guard.AllowedHostSuffixes) == 0 {
		return nil
	}
	if host == "" {
		return plugin.NotAllowedf(param, "is required by the Ingress provider config, expected a host under one of %q (kubernetes.ingress.allowed_host_suffixes)", guard.AllowedHostSuffixes)
	}
	name := strings.ToLower(strings.ReplaceAll(host, idPlaceholder, "0"))
	for _, s := range guard.AllowedHostSuffixes {
		s = strings.ToLower(strings.TrimPrefix(s, "."))
		if name == s || strings.HasSuffix(name, "."+s) {
			return nil
		}
	}
	return plugin.NotAllowedf(param, "%s %q is not allowed by the Ingress provider config (kubernetes.ingress.allowed_host_suffixes: %q)", param, host, guard.AllowedHostSuffixes)
}
