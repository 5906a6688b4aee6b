package plugin

import (
	"fmt"
	"slices"
)

// PortRangeConfig is a load-balancer plugin's listener port table, such as
// [alibabacloud.slb]: the ports its allocator hands out on every load balancer (OKG's keys).
// Whether MaxPort itself is handed out is the plugin's rule (included for Alibaba Cloud and
// HwCloud, excluded for Volcengine and JdCloud, as in OKG).
type PortRangeConfig struct {
	// MinPort is `min_port`, the lowest listener port, 1-65535.
	MinPort int32 `toml:"min_port"`
	// MaxPort is `max_port`, the highest listener port (or one past it), MinPort-65535.
	MaxPort int32 `toml:"max_port"`
	// BlockPorts is `block_ports`: ports never handed out.
	BlockPorts []int32 `toml:"block_ports"`
	// MaxPortsPerPod is `max_ports_per_pod` (this project's addition; OKG has no such key):
	// how many listener ports one pod may ask for (its PortProtocols entries, a TCPUDP pair
	// counting once); more is a ParameterError naming PortProtocols. Unset means
	// DefaultLBMaxPortsPerPod; 0 means no cap but the range's size, OKG's behaviour.
	MaxPortsPerPod *int32 `toml:"max_ports_per_pod"`
	// MaxReservedPortsPerNamespace is `max_reserved_ports_per_namespace` (this project's
	// addition): how many listener ports a replica holds at once for the CREATEs of one
	// namespace whose pods it has not seen yet (such a claim counts at most 44 s when the
	// pod never shows up); beyond it a CREATE gets a RetryError. Unset means
	// DefaultLBMaxReservedPortsPerNamespace; 0 means no cap.
	MaxReservedPortsPerNamespace *int32 `toml:"max_reserved_ports_per_namespace"`
}

// DefaultLBMaxPortsPerPod is the default of a load-balancer table's max_ports_per_pod: 16
// listener ports. OKG's recorded cases ask for at most 3, a game server exposes a handful
// (game, query, voice, metrics); 16 leaves room for more while one pod cannot take a whole
// load balancer's range (up to 199 listeners) from every other namespace that names it.
const DefaultLBMaxPortsPerPod = 16

// DefaultLBMaxReservedPortsPerNamespace is the default of a load-balancer table's
// max_reserved_ports_per_namespace: 64 listener ports. A claim for a pod not seen yet lasts
// from its CREATE admission until the informer shows the pod, normally milliseconds, so only
// a namespace with dozens of CREATEs in flight at once, or one whose CREATEs are refused after
// this webhook, reaches it; such a namespace cannot hold more than 64 ports of the load
// balancers it names for the 44 s each such claim counts.
const DefaultLBMaxReservedPortsPerNamespace = 64

// PortsPerPod is r's max_ports_per_pod with its default: 0 means no cap.
func (r PortRangeConfig) PortsPerPod() int {
	if r.MaxPortsPerPod == nil {
		return DefaultLBMaxPortsPerPod
	}
	return int(*r.MaxPortsPerPod)
}

// ReservedPortsPerNamespace is r's max_reserved_ports_per_namespace with its default: 0
// means no cap.
func (r PortRangeConfig) ReservedPortsPerNamespace() int {
	if r.MaxReservedPortsPerNamespace == nil {
		return DefaultLBMaxReservedPortsPerNamespace
	}
	return int(*r.MaxReservedPortsPerNamespace)
}

// AlibabaCloudConfig is the [alibabacloud] table. OKG's `enable` switches all nine of its
// Alibaba Cloud plugins together; here it switches those this manager has: AlibabaCloud-EIP
// and AlibabaCloud-NATGW (no table of their own), AlibabaCloud-SLB when [alibabacloud.slb] is
// present and AlibabaCloud-NLB when [alibabacloud.nlb] is.
type AlibabaCloudConfig struct {
	// Enable is `enable`. false, the default, leaves every Alibaba Cloud type to OKG.
	Enable bool `toml:"enable"`
	// SLB is [alibabacloud.slb]: OKG's rules, block ports strictly inside (min_port, max_port)
	// and fewer than 200 ports in all, (max_port - min_port) - len(block_ports) < 200.
	SLB *PortRangeConfig `toml:"slb"`
	// NLB is [alibabacloud.nlb]: block ports strictly inside (min_port, max_port).
	NLB *PortRangeConfig `toml:"nlb"`
}

// HwCloudConfig is the [hwcloud] table: HwCloud-CCE-EIP, HwCloud-ELB when [hwcloud.elb] is
// present, and HwCloud-CCE-ELB when [hwcloud.cce.elb] is.
type HwCloudConfig struct {
	// Enable is `enable`. false, the default, leaves every HwCloud type to OKG.
	Enable bool `toml:"enable"`
	// ELB is [hwcloud.elb]: block ports strictly inside (min_port, max_port), and
	// (max_port - min_port) - len(block_ports) at most 200 (OKG's rules).
	ELB *PortRangeConfig `toml:"elb"`
	// CCE is [hwcloud.cce].
	CCE *HwCloudCCEConfig `toml:"cce"`
	// ResultWriters are `result_writers` and `result_writer_groups`: who may write the
	// address HwCloud-CCE-EIP reads (Yangtse's yangtse.io/allocated-ipv4-eip).
	ResultWriters
}

// HwCloudCCEConfig is the [hwcloud.cce] table.
type HwCloudCCEConfig struct {
	// ELB is [hwcloud.cce.elb], HwCloud-CCE-ELB's listener ports on a named ELB (an
	// auto-created ELB takes the first ports of the range): block ports strictly inside
	// (min_port, max_port), max_port handed out (OKG's rules; OKG's CCE table has no size
	// limit).
	ELB *PortRangeConfig `toml:"elb"`
	// MultiELB is [hwcloud.cce.multi-elb], the table of a later OKG's HwCloud-CCE-Multi-ELBs.
	// It is accepted so that such a file parses, and not read: that type is not served here.
	MultiELB map[string]any `toml:"multi-elb"`
	// AllowELBAutoCreate is `allow_elb_autocreate` (this project's addition; OKG has no such
	// key): whether a HwCloud-CCE-ELB network-conf may ask CCE to create an ELB for its pod
	// (kubernetes.io/elb.autocreate). false, the default: such a network-conf is a
	// parameterError, since the ELB is a billable resource the platform did not name.
	AllowELBAutoCreate bool `toml:"allow_elb_autocreate"`
}

// VolcengineConfig is the [volcengine] table: Volcengine-EIP, and Volcengine-CLB when
// [volcengine.clb] is present.
type VolcengineConfig struct {
	// Enable is `enable`. false, the default, leaves every Volcengine type to OKG.
	Enable bool `toml:"enable"`
	// CLB is [volcengine.clb]: block ports within [min_port, max_port) (OKG's rule; max_port
	// is not handed out).
	CLB *PortRangeConfig `toml:"clb"`
	// ResultWriters are `result_writers` and `result_writer_groups`: who may write the
	// addresses Volcengine-EIP reads (vke.volcengine.com/allocated-eips).
	ResultWriters
}

// JdCloudConfig is the [jdcloud] table: JdCloud-EIP, and JdCloud-NLB when [jdcloud.nlb] is
// present.
type JdCloudConfig struct {
	// Enable is `enable`. false, the default, leaves every JdCloud type to OKG.
	Enable bool `toml:"enable"`
	// NLB is [jdcloud.nlb] (max_port is not handed out). OKG's JdCloud-NLB does not read
	// block_ports; here a block_ports entry is an error rather than ignored.
	NLB *PortRangeConfig `toml:"nlb"`
	// ResultWriters are `result_writers` and `result_writer_groups`: who may write the
	// address JdCloud-EIP reads (jdos.jd.com/eip.id and jdos.jd.com/eip.ip).
	ResultWriters
}

// TencentCloudConfig is the [tencentcloud] table: TencentCloud-CLB.
type TencentCloudConfig struct {
	// Enable is `enable`. false, the default, leaves TencentCloud-CLB to OKG.
	Enable bool `toml:"enable"`
	// CLB is [tencentcloud.clb] (min_port, max_port). OKG parses it and its TencentCloud-CLB
	// does not read it (tke-extend-network-controller's port pools hold the ports); it is
	// accepted so that OKG's file parses, and not read.
	CLB map[string]any `toml:"clb"`
	// ResultWriters are `result_writers` and `result_writer_groups`: who may write the
	// answer TencentCloud-CLB reads (networking.cloud.tencent.com/clb-port-mapping-result
	// and clb-port-mapping-status): tke-extend-network-controller's ServiceAccount.
	ResultWriters
}

// AWSConfig is the [aws] table: AmazonWebServices-NLB when [aws.nlb] is present.
type AWSConfig struct {
	// Enable is `enable`. false, the default (OKG ships it false too), leaves
	// AmazonWebServices-NLB to OKG.
	Enable bool `toml:"enable"`
	// NLB is [aws.nlb]: the listener ports handed out on every NLB, max_port included, block
	// ports strictly inside (min_port, max_port), and at most AWSMaxListenersPerNLB ports in
	// all (OKG's rule: an NLB has at most 50 listeners), (max_port - min_port + 1) -
	// len(block_ports) <= 50.
	NLB *PortRangeConfig `toml:"nlb"`
}

// AWSMaxListenersPerNLB is the listeners one AWS Network Load Balancer may have: 50, AWS's
// quota "Listeners per Network Load Balancer" (Elastic Load Balancing quotas) and OKG's
// bound on [aws.nlb]'s range.
const AWSMaxListenersPerNLB = 50

// CloudProviders are the provider tables of load-balancer plugins this project reads, in the
// order their plugins are registered.
var CloudProviders = []string{"alibabacloud", "hwcloud", "volcengine", "jdcloud", "tencentcloud", "aws"}

// EnabledProviders returns the provider tables whose plugins this configuration registers:
// "kubernetes" and the cloud providers with enable = true.
func (c Config) EnabledProviders() []string {
	var out []string
	for _, p := range append([]string{"kubernetes"}, CloudProviders...) {
		if c.enabled(p) {
			out = append(out, p)
		}
	}
	return out
}

func (c Config) enabled(provider string) bool {
	switch provider {
	case "kubernetes":
		return c.Kubernetes.Enable
	case "alibabacloud":
		return c.AlibabaCloud.Enable
	case "hwcloud":
		return c.HwCloud.Enable
	case "volcengine":
		return c.Volcengine.Enable
	case "jdcloud":
		return c.JdCloud.Enable
	case "tencentcloud":
		return c.TencentCloud.Enable
	case "aws":
		return c.AWS.Enable
	}
	return false
}

// rangeRule is one table's check beyond 1 <= min_port <= max_port <= 65535.
type rangeRule struct {
	// blockClosedLo puts the block ports within [min, max) (Volcengine); otherwise they
	// are strictly inside (min, max).
	blockClosedLo bool
	// maxSize is the largest (max_port - min_port) - len(block_ports); 0 for none.
	maxSize int
	// noBlock refuses block_ports (the plugin does not read them).
	noBlock bool
	// maxExcluded: the plugin does not hand out max_port itself.
	maxExcluded bool
	// maxPorts is the most ports the range may hand out, (max_port - min_port + 1) -
	// len(block_ports); 0 for none.
	maxPorts int
}

// validate checks r, a table named key ("alibabacloud.slb"); errors name the key.
func (r PortRangeConfig) validate(key string, rule rangeRule) []error {
	var errs []error
	if r.MinPort < 1 || r.MinPort > 65535 {
		errs = append(errs, fmt.Errorf("%s.min_port (%d) must be within 1-65535", key, r.MinPort))
	}
	if r.MaxPort < 1 || r.MaxPort > 65535 {
		errs = append(errs, fmt.Errorf("%s.max_port (%d) must be within 1-65535", key, r.MaxPort))
	}
	if r.MinPort > r.MaxPort {
		errs = append(errs, fmt.Errorf("%s.min_port (%d) is greater than %s.max_port (%d)", key, r.MinPort, key, r.MaxPort))
	} else if rule.maxExcluded && r.MinPort == r.MaxPort {
		errs = append(errs, fmt.Errorf("%s.min_port (%d) equals %s.max_port, which this plugin does not hand out: no port at all", key, r.MinPort, key))
	}
	if r.MaxPortsPerPod != nil && *r.MaxPortsPerPod < 0 {
		errs = append(errs, fmt.Errorf("%s.max_ports_per_pod (%d) must be 0 (no cap) or positive", key, *r.MaxPortsPerPod))
	}
	if r.MaxReservedPortsPerNamespace != nil && *r.MaxReservedPortsPerNamespace < 0 {
		errs = append(errs, fmt.Errorf("%s.max_reserved_ports_per_namespace (%d) must be 0 (no cap) or positive", key, *r.MaxReservedPortsPerNamespace))
	}
	if rule.noBlock && len(r.BlockPorts) > 0 {
		errs = append(errs, fmt.Errorf("%s.block_ports is not read by this plugin (OKG ignores it too): remove it", key))
	}
	for i, b := range r.BlockPorts {
		switch {
		case rule.blockClosedLo && (b < r.MinPort || b >= r.MaxPort):
			errs = append(errs, fmt.Errorf("%s.block_ports[%d] (%d) must be within [min_port, max_port) = [%d, %d)", key, i, b, r.MinPort, r.MaxPort))
		case !rule.blockClosedLo && (b <= r.MinPort || b >= r.MaxPort):
			errs = append(errs, fmt.Errorf("%s.block_ports[%d] (%d) must be strictly between min_port (%d) and max_port (%d)", key, i, b, r.MinPort, r.MaxPort))
		}
		if slices.Contains(r.BlockPorts[:i], b) {
			errs = append(errs, fmt.Errorf("%s.block_ports[%d] (%d) is listed twice", key, i, b))
		}
	}
	if rule.maxSize > 0 {
		if n := int(r.MaxPort-r.MinPort) - len(r.BlockPorts); n > rule.maxSize {
			errs = append(errs, fmt.Errorf("%s: (max_port - min_port) - len(block_ports) is %d, at most %d allowed (OKG's rule: one load balancer has at most %d listeners here)", key, n, rule.maxSize, rule.maxSize))
		}
	}
	if rule.maxPorts > 0 {
		if n := int(r.MaxPort-r.MinPort) + 1 - len(r.BlockPorts); n > rule.maxPorts {
			errs = append(errs, fmt.Errorf("%s: (max_port - min_port + 1) - len(block_ports) is %d, at most %d allowed (one load balancer has at most %d listeners)", key, n, rule.maxPorts, rule.maxPorts))
		}
	}
	return errs
}

// validateClouds checks the enabled cloud providers' tables (a disabled provider's tables
// are not read, as in OKG). Every provider has a plugin that needs no table (an EIP plugin),
// so none of the tables is required.
func (c Config) validateClouds() []error {
	var errs []error
	type table struct {
		key  string
		r    *PortRangeConfig
		rule rangeRule
	}
	check := func(_ string, enabled bool, tables ...table) {
		if !enabled {
			return
		}
		for _, t := range tables {
			if t.r != nil {
				errs = append(errs, t.r.validate(t.key, t.rule)...)
			}
		}
	}
	check("alibabacloud", c.AlibabaCloud.Enable,
		table{"alibabacloud.slb", c.AlibabaCloud.SLB, rangeRule{maxSize: 199}},
		table{"alibabacloud.nlb", c.AlibabaCloud.NLB, rangeRule{}})
	var cceELB *PortRangeConfig
	if c.HwCloud.CCE != nil {
		cceELB = c.HwCloud.CCE.ELB
	}
	check("hwcloud", c.HwCloud.Enable, table{"hwcloud.elb", c.HwCloud.ELB, rangeRule{maxSize: 200}}, table{"hwcloud.cce.elb", cceELB, rangeRule{}})
	check("volcengine", c.Volcengine.Enable, table{"volcengine.clb", c.Volcengine.CLB, rangeRule{blockClosedLo: true, maxExcluded: true}})
	check("jdcloud", c.JdCloud.Enable, table{"jdcloud.nlb", c.JdCloud.NLB, rangeRule{noBlock: true, maxExcluded: true}})
	check("aws", c.AWS.Enable, table{"aws.nlb", c.AWS.NLB, rangeRule{maxPorts: AWSMaxListenersPerNLB}})
	for _, w := range []struct {
		key     string
		enabled bool
		writers ResultWriters
	}{{"hwcloud", c.HwCloud.Enable, c.HwCloud.ResultWriters}, {"volcengine", c.Volcengine.Enable, c.Volcengine.ResultWriters}, {"jdcloud", c.JdCloud.Enable, c.JdCloud.ResultWriters},
		{"tencentcloud", c.TencentCloud.Enable, c.TencentCloud.ResultWriters}} {
		if w.enabled {
			errs = append(errs, w.writers.validate(w.key)...)
		}
	}
	return errs
}
