package hwcloud

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// ELBName is the network type of the ELB plugin (OKG's name); ELBAlias its family.
const (
	ELBName  = "HwCloud-ELB"
	ELBAlias = "ELB-Network"
	// AnnotationELBID names the ELB the Service's listeners go on (also what the allocator
	// counts at start).
	AnnotationELBID = "kubernetes.io/elb.id"
)

// Network-conf parameters of HwCloud-ELB (OKG's names).
const (
	ParamELBIDs                   = "ElbIds"
	ParamELBClass                 = "ElbClass"
	ParamELBConnLimit             = "ElbConnLimit"
	ParamELBAlgorithm             = "ElbLbAlgorithm"
	ParamELBSessionAffinityFlag   = "ElbSessionAffinityFlag"
	ParamELBSessionAffinityOption = "ElbSessionAffinityOption"
	ParamELBTransparentClientIP   = "ElbTransparentClientIP"
	ParamELBXForwardedHost        = "ElbXForwardedHost"
	ParamELBIdleTimeout           = "ElbIdleTimeout"
	ParamELBRequestTimeout        = "ElbRequestTimeout"
	ParamELBResponseTimeout       = "ElbResponseTimeout"
	ParamHealthCheckFlag          = "LBHealthCheckFlag"
	ParamHealthCheckOption        = "LBHealthCheckOption"
	ParamExternalTrafficPolicy    = "ExternalTrafficPolicyType"
	ParamPublishNotReadyAddresses = "PublishNotReadyAddresses"
)

// ELBSpec is HwCloud-ELB for the load-balancer engine: ids in ElbIds, the last ELB with
// room, ports named "<port>-<protocol>", OKG's kubernetes.io/elb.* annotations.
func ELBSpec() lb.Spec {
	return lb.Spec{
		Name: ELBName, Alias: ELBAlias,
		IDsParam: ParamELBIDs, IDAnnotation: AnnotationELBID, OwnedAnnotations: []string{AnnotationELBID, "kubernetes.io/elb.class", "kubernetes.io/elb.connection-limit",
			"kubernetes.io/elb.lb-algorithm", "kubernetes.io/elb.session-affinity-flag", "kubernetes.io/elb.session-affinity-option",
			"kubernetes.io/elb.enable-transparent-client-ip", "kubernetes.io/elb.x-forwarded-host", "kubernetes.io/elb.idle-timeout",
			"kubernetes.io/elb.request-timeout", "kubernetes.io/elb.response-timeout", "kubernetes.io/elb.health-check-flag",
			"kubernetes.io/elb.health-check-option"},
		AllowTCPUDP: true, PortNames: lb.PortNameWithProtocol,
		Params: []string{ParamELBClass, ParamELBConnLimit, ParamELBAlgorithm, ParamELBSessionAffinityFlag, ParamELBSessionAffinityOption,
			ParamELBTransparentClientIP, ParamELBXForwardedHost, ParamELBIdleTimeout, ParamELBRequestTimeout, ParamELBResponseTimeout,
			ParamHealthCheckFlag, ParamHealthCheckOption, ParamExternalTrafficPolicy, ParamPublishNotReadyAddresses},
		Customize:     customizeELB,
		ExhaustedType: plugin.ParameterError,
		Exhausted:     lb.NoAvailablePorts,
	}
}

// NewELB returns the HwCloud-ELB plugin handing out listener ports of rng ([hwcloud.elb]:
// max_port included).
func NewELB(rng lb.Range) *lb.Plugin {
	rng.MaxInclusive = true
	return lb.New(ELBSpec(), rng)
}

// oneOf returns the value of param in conf, folded (to lower or upper case), or def when
// it is absent; a folded value not in allowed is a ParameterError naming param, its message
// format applied to the value as written.
func oneOf(conf networkstatus.Conf, param, def string, fold func(string) string, format string, allowed ...string) (string, error) {
	v, ok := conf.Last(param)
	if !ok {
		return def, nil
	}
	if f := fold(v); slices.Contains(allowed, f) {
		return f, nil
	}
	return "", plugin.ParamErrorf(param, format, v)
}

// customizeELB writes OKG's HwCloud-ELB annotations: elb.class (dedicated or shared, in any
// case) with connection-limit for shared, lb-algorithm (ROUND_ROBIN, LEAST_CONNECTIONS or
// SOURCE_IP, in any case), session affinity flag and option, transparent client IP and
// X-Forwarded-Host (booleans; another value is ignored, as in OKG), the idle, request and
// response timeouts when set within 0-4000, 1-300 and 1-300 (ignored otherwise, as in OKG),
// the health-check flag (on or off, else a ParameterError) and its JSON option; and the
// external traffic policy and publishNotReadyAddresses.
func customizeELB(conf networkstatus.Conf, svc *corev1.Service) error {
	a := svc.Annotations
	class, err := oneOf(conf, ParamELBClass, "dedicated", strings.ToLower, "invalid elb class: %s, expected dedicated or shared", "dedicated", "shared")
	if err != nil {
		return err
	}
	a["kubernetes.io/elb.class"] = class
	if class == "shared" {
		limit := "-1"
		if v, ok := conf.Last(ParamELBConnLimit); ok {
			if _, err := strconv.Atoi(v); err != nil {
				return plugin.ParamErrorf(ParamELBConnLimit, "invalid elb connection limit: %s, expected an integer", v)
			}
			limit = v
		}
		a["kubernetes.io/elb.connection-limit"] = limit
	}
	algorithm, err := oneOf(conf, ParamELBAlgorithm, "ROUND_ROBIN", strings.ToUpper,
		"invalid elb lb algorithm: %s, expected ROUND_ROBIN, LEAST_CONNECTIONS or SOURCE_IP", "ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP")
	if err != nil {
		return err
	}
	a["kubernetes.io/elb.lb-algorithm"] = algorithm
	affinity, err := oneOf(conf, ParamELBSessionAffinityFlag, "off", strings.ToLower, "invalid elb session affinity flag: %s, expected on or off", "on", "off")
	if err != nil {
		return err
	}
	a["kubernetes.io/elb.session-affinity-flag"] = affinity
	option, _ := conf.Last(ParamELBSessionAffinityOption)
	a["kubernetes.io/elb.session-affinity-option"] = option
	for param, key := range map[string]string{ParamELBTransparentClientIP: "kubernetes.io/elb.enable-transparent-client-ip", ParamELBXForwardedHost: "kubernetes.io/elb.x-forwarded-host"} {
		b := false
		if v, ok := conf.Last(param); ok {
			if parsed, err := strconv.ParseBool(v); err == nil {
				b = parsed
			}
		}
		a[key] = strconv.FormatBool(b)
	}
	for _, t := range []struct {
		param, key string
		lo, hi     int
	}{{ParamELBIdleTimeout, "kubernetes.io/elb.idle-timeout", 0, 4000}, {ParamELBRequestTimeout, "kubernetes.io/elb.request-timeout", 1, 300},
		{ParamELBResponseTimeout, "kubernetes.io/elb.response-timeout", 1, 300}} {
		if v, ok := conf.Last(t.param); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= t.lo && n <= t.hi {
				a[t.key] = v
			}
		}
	}
	flag, err := oneOf(conf, ParamHealthCheckFlag, "on", strings.ToLower, "invalid lb health check switch value: %s", "on", "off")
	if err != nil {
		return err
	}
	a["kubernetes.io/elb.health-check-flag"] = flag
	if flag == "on" {
		option, _ := conf.Last(ParamHealthCheckOption)
		if option != "" && !json.Valid([]byte(option)) {
			return plugin.ParamErrorf(ParamHealthCheckOption, "invalid lb health check option: %s, expected a JSON object", option)
		}
		a["kubernetes.io/elb.health-check-option"] = option
	}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if v, ok := conf.Last(ParamExternalTrafficPolicy); ok && strings.EqualFold(v, "Local") {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	if v, ok := conf.Last(ParamPublishNotReadyAddresses); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return plugin.ParamErrorf(ParamPublishNotReadyAddresses, "%q is not a boolean, expected true or false", v)
		}
		svc.Spec.PublishNotReadyAddresses = b
	}
	return nil
}
