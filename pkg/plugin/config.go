package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Defaults of the provider configuration, OKG's shipped config.toml
// (config/manager/config.toml and its docs): the Kubernetes provider enabled, host
// ports 8000-9000.
const (
	DefaultHostPortMin int32 = 8000
	DefaultHostPortMax int32 = 9000
)

// Config is the provider configuration, OKG's TOML file (flag --provider-config,
// /etc/kruise-game/config.toml in OKG). The Kubernetes provider and the load-balancer
// plugins' cloud providers are read; the tables of other providers are ignored, and their
// types are left to OKG.
type Config struct {
	// Kubernetes is the [kubernetes] table.
	Kubernetes KubernetesConfig `toml:"kubernetes"`
	// AlibabaCloud is the [alibabacloud] table.
	AlibabaCloud AlibabaCloudConfig `toml:"alibabacloud"`
	// HwCloud is the [hwcloud] table.
	HwCloud HwCloudConfig `toml:"hwcloud"`
	// Volcengine is the [volcengine] table.
	Volcengine VolcengineConfig `toml:"volcengine"`
	// JdCloud is the [jdcloud] table.
	JdCloud JdCloudConfig `toml:"jdcloud"`
	// TencentCloud is the [tencentcloud] table.
	TencentCloud TencentCloudConfig `toml:"tencentcloud"`
	// AWS is the [aws] table.
	AWS AWSConfig `toml:"aws"`
}

// KubernetesConfig is the [kubernetes] table.
type KubernetesConfig struct {
	// Enable is `enable`: whether the Kubernetes-* plugins are registered.
	Enable bool `toml:"enable"`
	// HostPort is the [kubernetes.hostPort] table.
	HostPort HostPortConfig `toml:"hostPort"`
	// Ingress is the [kubernetes.ingress] table (this project's addition).
	Ingress IngressConfig `toml:"ingress"`
}

// IngressConfig is the [kubernetes.ingress] table (this project's addition; OKG has
// none and passes every Annotation and Host through): what the pod author's network-conf
// may put on the Ingress that Kubernetes-Ingress writes. The plugin enforces it when it
// parses the network-conf, before any object is written; a refused value is a
// ParameterError naming the annotation or host.
//
// The default refuses the annotation keys through which whoever writes the pod could
// inject configuration into the shared ingress controller, or make it send requests
// elsewhere, whatever the controller's prefix: names ending in "-snippet"
// (configuration-snippet, server-snippet, auth-snippet, ...), auth-url, auth-signin,
// auth-tls-* and mirror-* (the ingress-nginx injections of 2025, IngressNightmare:
// CVE-2025-1974, CVE-2025-24514, CVE-2025-1097, CVE-2025-1098, and the snippet class
// before them).
type IngressConfig struct {
	// AllowedAnnotations is `allowed_annotations`: the Annotation keys a network-conf
	// may set. An entry is an exact key ("nginx.ingress.kubernetes.io/rewrite-target")
	// or a prefix ending in "*" ("nginx.ingress.kubernetes.io/*"; "*" alone is any key).
	// nil (the key absent) is the default: any key but those of the injection families
	// above. A list, even an empty one, allows only the keys it matches (an empty list: no
	// Annotation at all). A key of an injection family passes only when listed exactly,
	// never through a prefix.
	AllowedAnnotations []string `toml:"allowed_annotations"`
	// AllowedHostSuffixes is `allowed_host_suffixes`: the DNS suffixes that Host and
	// every TlsHosts entry must have. An entry "example.com" (a leading "." is the
	// same) allows example.com itself and any name under it (play-3.example.com,
	// *.example.com), compared without case. Empty, the default, allows any host, as
	// OKG does; when set, a network-conf without Host (an Ingress rule for every host) is
	// refused too.
	AllowedHostSuffixes []string `toml:"allowed_host_suffixes"`
	// AllowCatchAllHost is `allow_catch_all_host`: whether a network-conf without Host may
	// have its Ingress written. Such a rule serves every host, so on a shared ingress
	// controller it can take requests meant for other namespaces' hosts that do not have
	// the same path. false, the default, refuses it with a ParameterError naming Host; OKG
	// writes it. Ignored when AllowedHostSuffixes is set (a Host is then required anyway).
	AllowCatchAllHost bool `toml:"allow_catch_all_host"`
	// AllowedIngressClasses is `allowed_ingress_classes`, the platform's opt-in restriction
	// of the IngressClassName values a network-conf may name. nil (the key absent, the
	// default) allows any class, as OKG does, with a warning for a class no IngressClass
	// names. Set, it allows the listed classes and the cluster's default class (an
	// IngressClass annotated ingressclass.kubernetes.io/is-default-class: "true"), so that
	// a pod cannot have its Ingress served by a controller the platform did not mean for pods
	// (an internal or admin one); an entry is an IngressClass name, "*" any class; set and
	// empty allows the default class only. A network-conf without IngressClassName is always
	// allowed: the API server gives its Ingress the default class. A refused class is a
	// ParameterError naming IngressClassName.
	AllowedIngressClasses []string `toml:"allowed_ingress_classes"`
}

// HostPortConfig is the [kubernetes.hostPort] table: the host ports
// Kubernetes-HostPort allocates from, MinPort to MaxPort inclusive.
type HostPortConfig struct {
	// MinPort is `min_port`, the lowest host port handed out, 1-65535.
	MinPort int32 `toml:"min_port"`
	// MaxPort is `max_port`, the highest host port handed out, MinPort-65535.
	MaxPort int32 `toml:"max_port"`
	// MaxPodsPerPort is `max_pods_per_port` (this project's addition; OKG has no such
	// key): how many pods may share one host port (they must then run on different
	// nodes). 0, the default, means no limit, OKG's behaviour; 1 makes ports exclusive.
	MaxPodsPerPort int32 `toml:"max_pods_per_port"`
	// MaxPortsPerPod is `max_ports_per_pod` (this project's addition): how many host ports
	// one pod may ask for; more is a ParameterError naming ContainerPorts. 0, the default,
	// means no cap but the range's size, OKG's behaviour.
	MaxPortsPerPod int32 `toml:"max_ports_per_pod"`
	// MaxReservedPortsPerNamespace is `max_reserved_ports_per_namespace` (this project's
	// addition): how many host ports a replica holds at once for the CREATEs of one
	// namespace whose pods it has not seen yet (a CREATE that later admission refuses
	// holds its ports until the reservation expires); beyond it a CREATE gets a RetryError.
	// Default DefaultMaxReservedPortsPerNamespace; 0 means no cap.
	MaxReservedPortsPerNamespace int32 `toml:"max_reserved_ports_per_namespace"`
}

// DefaultMaxReservedPortsPerNamespace is the default of max_reserved_ports_per_namespace:
// 256 ports. Reservations end as soon as the pod informer shows the pod, normally within
// milliseconds, so only a namespace with hundreds of HostPort CREATEs in flight at once, or
// one whose CREATEs are refused after this webhook (a PodSecurity level that forbids
// hostPort, a quota), reaches it; such a namespace cannot hold more of the range.
const DefaultMaxReservedPortsPerNamespace = 256

// DefaultConfig returns the configuration used when the file is missing and the base
// onto which a file is decoded (keys a file omits keep these values).
func DefaultConfig() Config {
	return Config{Kubernetes: KubernetesConfig{
		Enable:   true,
		HostPort: HostPortConfig{MinPort: DefaultHostPortMin, MaxPort: DefaultHostPortMax, MaxReservedPortsPerNamespace: DefaultMaxReservedPortsPerNamespace},
	}}
}

// Size returns the number of ports in the range, MaxPort-MinPort+1 (0 when inverted).
func (h HostPortConfig) Size() int {
	if h.MaxPort < h.MinPort {
		return 0
	}
	return int(h.MaxPort) - int(h.MinPort) + 1
}

// Validate checks the configuration. Errors name the TOML keys, e.g.
// "kubernetes.hostPort.min_port (9000) is greater than kubernetes.hostPort.max_port (8000)".
func (c Config) Validate() error {
	h := c.Kubernetes.HostPort
	var errs []error
	if h.MinPort <= 0 || h.MinPort > 65535 {
		errs = append(errs, fmt.Errorf("kubernetes.hostPort.min_port (%d) must be within 1-65535", h.MinPort))
	}
	if h.MaxPort <= 0 || h.MaxPort > 65535 {
		errs = append(errs, fmt.Errorf("kubernetes.hostPort.max_port (%d) must be within 1-65535", h.MaxPort))
	}
	if h.MinPort > h.MaxPort {
		errs = append(errs, fmt.Errorf("kubernetes.hostPort.min_port (%d) is greater than kubernetes.hostPort.max_port (%d)", h.MinPort, h.MaxPort))
	}
	if h.MaxPodsPerPort < 0 {
		errs = append(errs, fmt.Errorf("kubernetes.hostPort.max_pods_per_port (%d) must be 0 (no limit) or positive", h.MaxPodsPerPort))
	}
	if h.MaxPortsPerPod < 0 {
		errs = append(errs, fmt.Errorf("kubernetes.hostPort.max_ports_per_pod (%d) must be 0 (no cap) or positive", h.MaxPortsPerPod))
	}
	if h.MaxReservedPortsPerNamespace < 0 {
		errs = append(errs, fmt.Errorf("kubernetes.hostPort.max_reserved_ports_per_namespace (%d) must be 0 (no cap) or positive", h.MaxReservedPortsPerNamespace))
	}
	errs = append(errs, c.Kubernetes.Ingress.validate()...)
	errs = append(errs, c.validateClouds()...)
	return errors.Join(errs...)
}

// validate checks the [kubernetes.ingress] table; errors name the key and the index,
// e.g. `kubernetes.ingress.allowed_annotations[1] ("a*b"): "*" may only end a prefix`.
func (c IngressConfig) validate() []error {
	var errs []error
	for i, a := range c.AllowedAnnotations {
		key := fmt.Sprintf("kubernetes.ingress.allowed_annotations[%d] (%q)", i, a)
		prefix, isPrefix := strings.CutSuffix(a, "*")
		switch {
		case a == "":
			errs = append(errs, fmt.Errorf("%s: expected an annotation key or a prefix ending in \"*\", got an empty string", key))
		case strings.Contains(prefix, "*"):
			errs = append(errs, fmt.Errorf("%s: \"*\" may only end a prefix, expected e.g. \"nginx.ingress.kubernetes.io/*\"", key))
		case !isPrefix:
			if msgs := validation.IsQualifiedName(a); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s: not an annotation key: %s", key, strings.Join(msgs, "; ")))
			}
		}
	}
	for i, h := range c.AllowedHostSuffixes {
		key := fmt.Sprintf("kubernetes.ingress.allowed_host_suffixes[%d] (%q)", i, h)
		name := strings.TrimPrefix(h, ".")
		if name == "" {
			errs = append(errs, fmt.Errorf("%s: expected a DNS suffix such as \"games.example.com\", got an empty name", key))
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: expected a DNS suffix such as \"games.example.com\": %s", key, strings.Join(msgs, "; ")))
		}
	}
	for i, name := range c.AllowedIngressClasses {
		if name == "*" {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("kubernetes.ingress.allowed_ingress_classes[%d] (%q): expected an IngressClass name or \"*\": %s", i, name, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// ParseConfig decodes TOML data over DefaultConfig and validates the result. Keys of
// the tables this project reads ([kubernetes] and the CloudProviders) that it does not know
// are an error (a typo such as `minport` would otherwise silently keep the default); other
// providers' tables are ignored.
func ParseConfig(data []byte) (Config, error) {
	cfg := DefaultConfig()
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		return Config{}, fmt.Errorf("decode provider config: %w", err)
	}
	var unknown []string
	for _, k := range md.Undecoded() {
		if len(k) > 0 && (k[0] == "kubernetes" || slices.Contains(CloudProviders, k[0])) {
			unknown = append(unknown, k.String())
		}
	}
	if len(unknown) > 0 {
		return Config{}, fmt.Errorf("decode provider config: unknown keys %v", unknown)
	}
	if md.IsDefined("kubernetes", "ingress", "allowed_annotations") && cfg.Kubernetes.Ingress.AllowedAnnotations == nil {
		cfg.Kubernetes.Ingress.AllowedAnnotations = []string{} // set, and empty: no Annotation allowed
	}
	if md.IsDefined("kubernetes", "ingress", "allowed_ingress_classes") && cfg.Kubernetes.Ingress.AllowedIngressClasses == nil {
		cfg.Kubernetes.Ingress.AllowedIngressClasses = []string{} // set, and empty: the default class only
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid provider config: %w", err)
	}
	return cfg, nil
}

// LoadConfig reads and parses the provider configuration file at path. A missing file
// is not an error: it returns DefaultConfig and logs a warning through
// ctrl.LoggerFrom(ctx) (OKG exits instead). Unreadable or invalid files are errors
// that name the path.
func LoadConfig(ctx context.Context, path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		def := DefaultConfig()
		ctrl.LoggerFrom(ctx).Info("Warning: provider config file not found, using defaults", "path", path,
			"kubernetesEnable", def.Kubernetes.Enable,
			"hostPortMin", def.Kubernetes.HostPort.MinPort, "hostPortMax", def.Kubernetes.HostPort.MaxPort,
			"ingressAnnotations", "any key but *-snippet", "ingressHosts", "any")
		return def, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read provider config %q: %w", path, err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("provider config %q: %w", path, err)
	}
	return cfg, nil
}
