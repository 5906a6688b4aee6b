package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// kubeFlags are kubectl's connection flags (client-go clientcmd): --kubeconfig (else
// $KUBECONFIG, else ~/.kube/config), --context, --cluster, --user.
type kubeFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

func (k *kubeFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (with --live; default $KUBECONFIG, else ~/.kube/config).")
	f.StringVar(&k.overrides.CurrentContext, "context", "", "The kubeconfig context to use (with --live).")
	f.StringVar(&k.overrides.Context.Cluster, "cluster", "", "The kubeconfig cluster to use (with --live).")
	f.StringVar(&k.overrides.Context.AuthInfo, "user", "", "The kubeconfig user to use (with --live).")
}

// clients are the clientsets of a live cluster.
type clients struct {
	core    kubernetes.Interface
	policy  versioned.Interface
	dynamic dynamic.Interface
	// namespace is the kubeconfig context's namespace, "default" when it has none.
	namespace string
}

// connect builds the clients from the kubeconfig, as kubectl loads it. Errors are I/O
// errors (exit 2).
func (k *kubeFlags) connect() (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &k.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, &ioError{fmt.Errorf("load kubeconfig: %w", err)}
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, &ioError{fmt.Errorf("load kubeconfig: %w", err)}
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, &ioError{fmt.Errorf("kubernetes client: %w", err)}
	}
	pc, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, &ioError{fmt.Errorf("policy client: %w", err)}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, &ioError{fmt.Errorf("dynamic client: %w", err)}
	}
	return &clients{core: core, policy: pc, dynamic: dyn, namespace: ns}, nil
}

// livePolicies lists every NetworkPluginPolicy of the cluster, as the manager's informer
// sees them (with their generations).
func (c *clients) livePolicies(ctx context.Context) ([]*v1alpha1.NetworkPluginPolicy, error) {
	list, err := c.policy.PolicyV1alpha1().NetworkPluginPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &ioError{fmt.Errorf("list NetworkPluginPolicies: %w", err)}
	}
	out := make([]*v1alpha1.NetworkPluginPolicy, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// runExplainLive explains pod/NAME from the cluster's policies, pod and namespace.
func runExplainLive(cmd *cobra.Command, s *streams, g *globalOptions, o *explainOptions, arg string) error {
	ctx := cmd.Context()
	perr, err := simulatedError(o.errorType, o.errorMessage, o.errorReason)
	if err != nil {
		return err
	}
	c, err := o.kube.connect()
	if err != nil {
		return err
	}
	namespace := o.namespaces
	if namespace == "" {
		namespace = c.namespace
	}
	name := strings.TrimPrefix(arg, "pod/")
	pod, err := c.core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return &ioError{fmt.Errorf("get pod %s/%s: %w", namespace, name, err)}
	}
	ns, err := c.core.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return &ioError{fmt.Errorf("get namespace %s: %w", namespace, err)}
	}
	policies, err := c.livePolicies(ctx)
	if err != nil {
		return err
	}
	if g.providerConfig == "" {
		// The manager's own provider configuration, so that its cloud plugins are known.
		g.providerConfigData, g.providerConfigSource = liveProviderConfig(ctx, c.core, g.rootNamespace, s.errOut)
	}
	reg, err := newRegistry(ctx, g)
	if err != nil {
		return err
	}
	eng, err := newEngine(ctx, g, reg, policies)
	if err != nil {
		return err
	}
	exp, err := eng.decide(ctx, podSource{pod: pod, where: "cluster"}, ns, request{operation: o.operation, err: perr})
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	return printExplanations(s.out, o.output, []*explanation{exp})
}

// ProviderConfigMapName is the manager's provider configuration ConfigMap in its namespace
// (config/manager/manager.yaml mounts it at /etc/kruise-game; the chart renders it as
// <fullname>-provider-config) and ProviderConfigKey its key.
const (
	ProviderConfigMapName = "network-plugin-policy-provider-config"
	ProviderConfigKey     = "config.toml"
)

// liveProviderConfig reads the manager's provider configuration from the ConfigMap
// ProviderConfigMapName of namespace (the manager's), and returns its config.toml and where
// it came from; nil (the built-in defaults, as the manager uses without the ConfigMap), with a
// note on errOut, when it does not exist, cannot be read or does not parse (explain needs
// no more than the policies, the pod and its namespace).
func liveProviderConfig(ctx context.Context, core kubernetes.Interface, namespace string, errOut io.Writer) ([]byte, string) {
	source := "ConfigMap " + namespace + "/" + ProviderConfigMapName
	cm, err := core.CoreV1().ConfigMaps(namespace).Get(ctx, ProviderConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(errOut, "note: no %s, the built-in defaults apply (a chart installed under another name: pass --provider-config)\n", source)
		return nil, source
	case err != nil:
		fmt.Fprintf(errOut, "note: the manager's provider configuration (%s) was not read, the built-in defaults apply (pass --provider-config): %v\n", source, err)
		return nil, source
	}
	data, ok := cm.Data[ProviderConfigKey]
	if !ok {
		fmt.Fprintf(errOut, "note: %s has no key %s, the built-in defaults apply\n", source, ProviderConfigKey)
		return nil, source
	}
	if _, err := plugin.ParseConfig([]byte(data)); err != nil {
		fmt.Fprintf(errOut, "note: %s does not parse (the manager refuses to start on it), the built-in defaults apply: %v\n", source, err)
		return nil, source
	}
	return []byte(data), source
}
