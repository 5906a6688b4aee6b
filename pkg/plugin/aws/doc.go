// Package aws holds the Amazon Web Services network plugin AmazonWebServices-NLB: a pod's
// ports published as listeners of one of the Network Load Balancers its network-conf names
// (NlbARNs), on ports this manager allocates. Per port the plugin writes an ACK TargetGroup
// (elbv2.services.k8s.aws/v1alpha1, which the ACK elbv2 controller creates in AWS), a
// Listener forwarding the NLB's port to it once it exists, and an AWS Load Balancer
// Controller TargetGroupBinding (elbv2.k8s.aws/v1beta1) registering the pod behind it, plus
// one ClusterIP Service the binding reads the pod from. The objects are read and written as
// unstructured objects with the fields the plugin owns: no AWS module is imported.
package aws

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns new instances of the AWS plugins cfg enables: none when [aws] enable is
// false or [aws.nlb] is absent, else AmazonWebServices-NLB, OKG's only AWS type. cfg must
// have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	if !cfg.AWS.Enable || cfg.AWS.NLB == nil {
		return nil
	}
	return []plugin.Plugin{NewNLB(lb.RangeOf(*cfg.AWS.NLB))}
}
