package plugin

// ProviderTypes are the network types OKG registers for one provider table of its
// configuration.
type ProviderTypes struct {
	// Provider is the TOML table that enables the provider in OKG's configuration (and in
	// this manager's): "kubernetes", "alibabacloud", ...
	Provider string
	// Types are the network types OKG registers when the table says enable = true, every
	// one of them at once.
	Types []string
}

// OKGNetworkTypes are OKG's network types by provider table, in OKG's order of providers:
// the Name() of every plugin in kruise-game's cloudprovider packages (d76ace2, the OKG release
// this manager follows). OKG enables a provider whole, so a provider can be handed over to
// this manager only when the cluster uses no type of it that this manager does not serve.
var OKGNetworkTypes = []ProviderTypes{
	{Provider: "kubernetes", Types: []string{"Kubernetes-HostPort", "Kubernetes-NodePort", "Kubernetes-Ingress"}},
	{Provider: "alibabacloud", Types: []string{"AlibabaCloud-SLB", "AlibabaCloud-NLB", "AlibabaCloud-SLB-SharedPort", "AlibabaCloud-NLB-SharedPort",
		"AlibabaCloud-EIP", "AlibabaCloud-NATGW", "AlibabaCloud-Multi-NLBs", "AlibabaCloud-AutoNLBs", "AlibabaCloud-AutoNLBs-V2"}},
	{Provider: "hwcloud", Types: []string{"HwCloud-ELB", "HwCloud-CCE-ELB", "HwCloud-CCE-EIP"}},
	{Provider: "volcengine", Types: []string{"Volcengine-CLB", "Volcengine-EIP"}},
	{Provider: "jdcloud", Types: []string{"JdCloud-NLB", "JdCloud-EIP"}},
	{Provider: "tencentcloud", Types: []string{"TencentCloud-CLB"}},
	{Provider: "aws", Types: []string{"AmazonWebServices-NLB"}},
}

// IsOKGNetworkType reports whether networkType is one of OKGNetworkTypes: false for a type of
// a newer OKG (AlibabaCloud-AutoNLBs-V3, say) or none of OKG's, which this manager knows
// nothing of beyond its provider's prefix.
func IsOKGNetworkType(networkType string) bool {
	for _, p := range OKGNetworkTypes {
		for _, t := range p.Types {
			if t == networkType {
				return true
			}
		}
	}
	return false
}
