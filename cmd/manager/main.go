// Command manager is the network-plugin-policy daemon: it watches NetworkPluginPolicy objects
// through an informer cache and (in later releases) serves the mutating pod webhook and runs
// the network retry and policy status controllers. It is ready only once its caches have
// synced.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// options are the manager's command-line flags.
type options struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	rootNamespace    string
	zap              zap.Options
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; \"0\" disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve metrics over HTTPS with Kubernetes authentication and authorization (TokenReview, SubjectAccessReview).")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader among replicas for the controllers (webhooks serve on every replica).")
	flag.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader-election Lease; empty means the namespace the manager runs in.")
	flag.StringVar(&o.rootNamespace, "root-namespace", "", "Namespace whose NetworkPluginPolicies are cluster-wide; empty means the namespace the manager runs in (POD_NAMESPACE or the service account's namespace).")
	o.zap.Development = false
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}

// run builds the manager from o and runs it until SIGTERM or SIGINT.
func run(o options) error {
	log := ctrl.Log.WithName("setup")
	rootNS, err := rootNamespace(o.rootNamespace)
	if err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(scheme))

	metrics := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "network-plugin-policy.policy.game.kruise.io",
		LeaderElectionNamespace: o.leaderElectionNS,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	policiesSynced, err := setupPolicyInformer(mgr)
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("policy-cache", policiesSynced); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}

	log.Info("Starting manager", "rootNamespace", rootNS, "leaderElection", o.leaderElect)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
