package alibabacloud

import (
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// SLBName is the network type of the SLB plugin (OKG's name); SLBAlias its family.
const (
	SLBName  = "AlibabaCloud-SLB"
	SLBAlias = "LB-Network"
)

// Annotation keys of Alibaba's cloud controller that the SLB plugin writes on its Services
// (OKG's).
const (
	annotationPrefix = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
	// AnnotationLBID names the SLB the Service's listeners go on.
	AnnotationLBID = annotationPrefix + "id"
	// LabelLBID is the label the cloud controller puts on a Service it manages, with the
	// SLB id (OKG reads it, and only it, when it counts ports at start).
	LabelLBID = "service.k8s.alibaba/loadbalancer-id"
	// LabelServiceProxyName makes kube-proxy skip the Service (value "dummy"): the SLB sends
	// traffic to the pod directly.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
)

// Network-conf parameters of the SLB plugin besides SlbIds, PortProtocols and Fixed (OKG's
// names).
const (
	ParamSLBIDs                   = "SlbIds"
	ParamExternalTrafficPolicy    = "ExternalTrafficPolicyType"
	ParamHealthCheckSwitch        = "LBHealthCheckSwitch"
	ParamHealthCheckFlag          = "LBHealthCheckFlag"
	ParamHealthCheckType          = "LBHealthCheckType"
	ParamHealthCheckConnectTimout = "LBHealthCheckConnectTimeout"
	ParamHealthCheckInterval      = "LBHealthCheckInterval"
	ParamHealthyThreshold         = "LBHealthyThreshold"
	ParamUnhealthyThreshold       = "LBUnhealthyThreshold"
	ParamHealthCheckURI           = "LBHealthCheckUri"
	ParamHealthCheckDomain        = "LBHealthCheckDomain"
	ParamHealthCheckMethod        = "LBHealthCheckMethod"
	ParamHealthCheckProtocolPort  = "LBHealthCheckProtocolPort"
	ParamHealthCheckConnectPort   = "LBHealthCheckConnectPort"
)

// ownedAnnotations are the Service annotations the SLB and NLB plugins write (under
// annotationPrefix): the others under that prefix (bandwidth, ACLs, ...) are a user's.
var ownedAnnotations = func() []string {
	var out []string
	for _, k := range []string{"id", "force-override-listeners", "health-check-flag", "health-check-switch", "health-check-type",
		"health-check-connect-port", "health-check-connect-timeout", "health-check-interval", "healthy-threshold", "unhealthy-threshold",
		"protocol-port", "health-check-domain", "health-check-uri", "health-check-method"} {
		out = append(out, annotationPrefix+k)
	}
	return out
}()

// SLBSpec is AlibabaCloud-SLB for the load-balancer engine: ids in SlbIds, the last SLB
// with room, ports named "<port>-<protocol>", TCPUDP allowed, the Service labelled for
// kube-proxy to skip, force-override-listeners and OKG's health-check annotations;
// exhausted ports are a ParameterError with OKG's message (its typo included).
func SLBSpec() lb.Spec {
	return lb.Spec{
		Name: SLBName, Alias: SLBAlias,
		IDsParam: ParamSLBIDs, IDAnnotation: AnnotationLBID, IDLabel: LabelLBID, OwnedAnnotations: ownedAnnotations,
		AllowTCPUDP: true, PortNames: lb.PortNameWithProtocol,
		Params: []string{ParamExternalTrafficPolicy, ParamHealthCheckSwitch, ParamHealthCheckFlag, ParamHealthCheckType,
			ParamHealthCheckConnectTimout, ParamHealthCheckInterval, ParamHealthyThreshold, ParamUnhealthyThreshold,
			ParamHealthCheckURI, ParamHealthCheckDomain, ParamHealthCheckMethod, ParamHealthCheckProtocolPort},
		Customize:     customizeSLB,
		ExhaustedType: plugin.ParameterError,
		Exhausted:     lb.NoAvailablePorts,
	}
}

// NewSLB returns the AlibabaCloud-SLB plugin handing out listener ports of rng ([alibabacloud.slb]:
// max_port included).
func NewSLB(rng lb.Range) *lb.Plugin {
	rng.MaxInclusive = true
	return lb.New(SLBSpec(), rng)
}

// healthCheck are the SLB or NLB health-check settings, OKG's defaults filled in.
type healthCheck struct {
	switchOn, flagOn                                          bool
	kind                                                      string
	connectPort, connectTimeout, interval, healthy, unhealthy int
	uri, domain, method, protocolPort                         string
}

var domainRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)

// parseHealthCheck reads OKG's health-check parameters with their defaults (switch on, flag
// off, tcp, connect timeout 5 s in 1-300, interval 10 s in 1-50, thresholds 2 in 2-10);
// a value out of range or of the wrong form is a ParameterError naming the parameter
// ("invalid lb health check interval: 51", OKG's wording).
func parseHealthCheck(conf networkstatus.Conf, nlb bool) (healthCheck, error) {
	hc := healthCheck{switchOn: true, kind: "tcp", connectTimeout: 5, interval: 10, healthy: 2, unhealthy: 2, protocolPort: "http:80,https:443"}
	if nlb {
		// OKG's NLB: the flag is on by default, and it has a connect port (0: the backend's).
		hc.flagOn = true
	}
	onOff := func(param string, dst *bool) error {
		v, ok := conf.Last(param)
		if !ok {
			return nil
		}
		switch strings.ToLower(v) {
		case "on":
			*dst = true
		case "off":
			*dst = false
		default:
			return plugin.ParamErrorf(param, "%q is not on or off", v)
		}
		return nil
	}
	number := func(param, what string, lo, hi int, dst *int) error {
		v, ok := conf.Last(param)
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return plugin.ParamErrorf(param, "invalid lb health check %s: %s, expected %d-%d", what, v, lo, hi)
		}
		*dst = n
		return nil
	}
	checks := []error{onOff(ParamHealthCheckFlag, &hc.flagOn)}
	if nlb {
		checks = append(checks, number(ParamHealthCheckConnectPort, "connect port", 0, 65535, &hc.connectPort))
	} else {
		checks = append(checks, onOff(ParamHealthCheckSwitch, &hc.switchOn))
	}
	for _, err := range append(checks,
		number(ParamHealthCheckConnectTimout, "connect timeout", 1, 300, &hc.connectTimeout),
		number(ParamHealthCheckInterval, "interval", 1, 50, &hc.interval),
		number(ParamHealthyThreshold, "healthy threshold", 2, 10, &hc.healthy),
		number(ParamUnhealthyThreshold, "unhealthy threshold", 2, 10, &hc.unhealthy),
	) {
		if err != nil {
			return hc, err
		}
	}
	if v, ok := conf.Last(ParamHealthCheckType); ok {
		hc.kind = strings.ToLower(v)
		if hc.kind != "tcp" && hc.kind != "http" {
			return hc, plugin.ParamErrorf(ParamHealthCheckType, "invalid lb health check type: %s, expected tcp or http", v)
		}
	}
	if hc.kind != "http" {
		return hc, nil
	}
	if v, ok := conf.Last(ParamHealthCheckMethod); ok {
		hc.method = strings.ToLower(v)
		if hc.method != "get" && hc.method != "head" {
			return hc, plugin.ParamErrorf(ParamHealthCheckMethod, "invalid lb health check method: %s, expected get or head", v)
		}
	}
	if v, ok := conf.Last(ParamHealthCheckURI); ok {
		if len(v) < 1 || len(v) > 80 || !strings.HasPrefix(v, "/") {
			return hc, plugin.ParamErrorf(ParamHealthCheckURI, "invalid lb health check uri: %s, expected 1-80 characters starting with /", v)
		}
		hc.uri = v
	}
	if v, ok := conf.Last(ParamHealthCheckDomain); ok {
		if len(v) < 1 || len(v) > 80 || !domainRE.MatchString(v) || strings.Contains(v, "..") || strings.Contains(v, "--") {
			return hc, plugin.ParamErrorf(ParamHealthCheckDomain, "invalid lb health check domain: %s, expected 1-80 characters of a-z, 0-9, - and .", v)
		}
		hc.domain = v
	}
	if v, ok := conf.Last(ParamHealthCheckProtocolPort); ok {
		for _, entry := range strings.Split(v, ",") {
			if proto, port, ok := strings.Cut(entry, ":"); !ok || proto == "" || port == "" {
				// OKG indexes past the missing ':' and crashes; here it is named.
				return hc, plugin.ParamErrorf(ParamHealthCheckProtocolPort, "invalid lb health check protocol port: %q, expected <protocol>:<port>,...", entry)
			}
		}
		hc.protocolPort = v
	}
	return hc, nil
}

// customizeSLB adds what OKG's SLB plugin writes besides the engine's common fields: the
// kube-proxy label, force-override-listeners, the health-check annotations, and the
// external traffic policy (ExternalTrafficPolicyType "Local", in any case, or Cluster).
func customizeSLB(conf networkstatus.Conf, svc *corev1.Service) error {
	hc, err := parseHealthCheck(conf, false)
	if err != nil {
		return err
	}
	hc.write(svc, false)
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if v, ok := conf.Last(ParamExternalTrafficPolicy); ok && strings.EqualFold(v, "Local") {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return nil
}

// write puts OKG's SLB (nlb false) or NLB health-check annotations, with the kube-proxy
// label and force-override-listeners, on svc: the SLB writes the switch and, with it on, the
// check's settings (and protocol-port for http); the NLB writes, with the flag on, its
// settings and connect port.
func (hc healthCheck) write(svc *corev1.Service, nlb bool) {
	svc.Labels = map[string]string{LabelServiceProxyName: "dummy"}
	a := svc.Annotations
	a[annotationPrefix+"force-override-listeners"] = "true"
	a[annotationPrefix+"health-check-flag"] = onOff(hc.flagOn)
	on := hc.switchOn
	if nlb {
		on = hc.flagOn
	} else {
		a[annotationPrefix+"health-check-switch"] = onOff(hc.switchOn)
	}
	if !on {
		return
	}
	a[annotationPrefix+"health-check-type"] = hc.kind
	if nlb {
		a[annotationPrefix+"health-check-connect-port"] = strconv.Itoa(hc.connectPort)
	}
	a[annotationPrefix+"health-check-connect-timeout"] = strconv.Itoa(hc.connectTimeout)
	a[annotationPrefix+"health-check-interval"] = strconv.Itoa(hc.interval)
	a[annotationPrefix+"healthy-threshold"] = strconv.Itoa(hc.healthy)
	a[annotationPrefix+"unhealthy-threshold"] = strconv.Itoa(hc.unhealthy)
	if hc.kind == "http" {
		if !nlb {
			a[annotationPrefix+"protocol-port"] = hc.protocolPort
		}
		a[annotationPrefix+"health-check-domain"] = hc.domain
		a[annotationPrefix+"health-check-uri"] = hc.uri
		a[annotationPrefix+"health-check-method"] = hc.method
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
