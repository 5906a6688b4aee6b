// Command manager is the network-plugin-policy daemon: it serves the mutating pod webhook
// that runs the network plugins under the NetworkPluginPolicy in force (read from an informer
// cache), the validating webhook for policies, and runs the network retry and policy status
// controllers. It is ready only once its certificates, the policy store and the plugins
// (HostPort's port usage, from the shared pod informer) are ready and the webhooks are
// registered.
package main

import (
	"cmp"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/okgvalidation"
	"github.com/okg-extensions/network-plugin-policy/pkg/eventrecorder"
	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	policywebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/policy"
	"github.com/okg-extensions/network-plugin-policy/pkg/webhookcert"
)

// options are the manager's command-line flags.
type options struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectionNS string
	shutdownDelay    time.Duration
	rootNamespace    string
	providerConfig   string
	ledgerName       string
	webhook          webhookOptions
	retry            retryOptions
	// okgWebhook and okgConfig name kruise-game-manager's webhook configuration and the
	// ConfigMap of its provider configuration (the OKG guard).
	okgWebhook string
	okgConfig  types.NamespacedName
	// okgValidating names kruise-game-manager's ValidatingWebhookConfiguration, and
	// manageOKGValidation says whether this manager keeps its matchCondition on that
	// configuration's GameServerSet entry.
	okgValidating       string
	manageOKGValidation bool
	// topNamespaces is how many namespaces get per-namespace state gauges.
	topNamespaces int
	zap           zap.Options
}

// retryOptions are the network retry controller's flags.
type retryOptions struct {
	// maxConcurrentReconciles is how many pods the controller reconciles in parallel.
	maxConcurrentReconciles int
	// minInterval is the platform's floor on every retry schedule's interval.
	minInterval time.Duration
	// maxRecreatesPerMinute bounds the Recreate evictions per namespace and minute.
	maxRecreatesPerMinute int
	// stateRefresh is how long a retry state may go unwritten while retries that would
	// fail the same way are counted in memory.
	stateRefresh time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; \"0\" disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve metrics over HTTPS with Kubernetes authentication and authorization (TokenReview, SubjectAccessReview).")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of Go's net/http/pprof profiles (controller-runtime's pprof server, plain HTTP, no authentication: bind it to localhost, e.g. 127.0.0.1:6060); \"0\" disables it.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader among replicas for the controllers (webhooks serve on every replica).")
	flag.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader-election Lease; empty means the namespace the manager runs in (POD_NAMESPACE or the service account's namespace).")
	flag.DurationVar(&o.shutdownDelay, "shutdown-delay", 3*time.Second, "How long the manager drains after SIGTERM before it stops: /readyz fails and every webhook answer closes its connection, so the API server's next requests open new connections to the other replicas instead of racing this one's shutdown. Keep it below the pod's terminationGracePeriodSeconds.")
	flag.StringVar(&o.rootNamespace, "root-namespace", "", "Namespace whose NetworkPluginPolicies are cluster-wide; empty means the namespace the manager runs in (POD_NAMESPACE or the service account's namespace).")
	flag.StringVar(&o.providerConfig, "provider-config", "/etc/kruise-game/config.toml", "OpenKruise Game provider configuration (TOML: [kubernetes] enable, [kubernetes.hostPort] min_port/max_port); a missing file means the built-in defaults.")
	flag.IntVar(&o.webhook.port, "webhook-port", 9443, "Port of the webhook server (HTTPS).")
	flag.StringVar(&o.webhook.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory of the webhook server's tls.crt and tls.key.")
	flag.DurationVar(&o.webhook.caOverlap, "ca-overlap", webhookcert.DefaultOverlap, "With --cert-rotation, how long the webhook configurations' caBundle keeps a previous CA beside a new one, so that replicas still serving a certificate of the previous CA stay trusted until they serve the new one; longer than a Secret volume takes to update.")
	flag.BoolVar(&o.webhook.certRotation, "cert-rotation", true, "Generate and rotate the webhook certificate in the Secret --webhook-secret-name and inject the CA into the webhook configurations; false when cert-manager (or you) provide --cert-dir.")
	flag.StringVar(&o.webhook.serviceName, "webhook-service-name", "network-plugin-policy-webhook-service", "Service in front of the webhook server (the certificate's DNS name is <name>.<namespace>.svc).")
	flag.Func("webhook-cert-dns-names", "Further DNS names of the rotated webhook certificate, comma-separated (for a webhook reached by URL, e.g. localhost during development).", func(v string) error {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n == "" {
				return fmt.Errorf("want comma-separated DNS names, got an empty name in %q", v)
			}
			o.webhook.extraDNSNames = append(o.webhook.extraDNSNames, strings.TrimSpace(n))
		}
		return nil
	})
	flag.StringVar(&o.ledgerName, "lb-ledger-name", lb.DefaultLedgerName, "Base name of the load-balancer plugins' port ledger: the ConfigMaps <name>-0 to <name>-7 of the manager's namespace, which the manifests create empty and the manager may get and update by name only.")
	flag.StringVar(&o.webhook.secretName, "webhook-secret-name", "network-plugin-policy-webhook-cert", "Secret that holds the rotated webhook certificate, mounted at --cert-dir.")
	flag.StringVar(&o.webhook.mutatingName, "mutating-webhook-configuration", "network-plugin-policy-mutating-webhook-configuration", "MutatingWebhookConfiguration to inject the CA into.")
	flag.StringVar(&o.webhook.validatingName, "validating-webhook-configuration", "network-plugin-policy-validating-webhook-configuration", "ValidatingWebhookConfiguration to inject the CA into.")
	flag.DurationVar(&o.webhook.timeout, "webhook-timeout", 30*time.Second, "timeoutSeconds of the mutating pod webhook configuration; policies with a plugin timeout close to it get a warning.")
	flag.IntVar(&o.retry.maxConcurrentReconciles, "max-concurrent-reconciles", network.DefaultMaxConcurrentReconciles,
		"Pods the network retry controller reconciles in parallel (each retry stamp waits for the mutating webhook's plugin run); at least 1.")
	flag.DurationVar(&o.retry.minInterval, "min-retry-interval", network.DefaultMinRetryInterval,
		"Platform floor on the retry interval: a policy's retry.interval (and maxInterval) below it counts as this long; at least 1s (the precision of the trigger stamps).")
	flag.DurationVar(&o.retry.stateRefresh, "retry-state-refresh", network.DefaultStateRefresh,
		"Longest time a pod's retry state goes unwritten while its retries are counted in memory (the caches show each would fail exactly as the last one); a real plugin run then writes it, at a slot of the pod's own in each such period (from its UID) so that pods that failed together are not refreshed together. At least 1m.")
	flag.IntVar(&o.retry.maxRecreatesPerMinute, "max-recreates-per-namespace-per-minute", network.DefaultMaxRecreatesPerNamespacePerMinute,
		"Most pods the Recreate exhausted action evicts in one namespace per minute (a token bucket of that rate and burst); the rest wait their turn, so one shared cause cannot evict a fleet at once. At least 1.")
	flag.IntVar(&o.topNamespaces, "metrics-top-namespaces", network.DefaultTopNamespaces,
		"Namespaces, those with the most not-Ready game-server networks, that get a series of npp_network_not_ready_pods_by_namespace (bounded cardinality: at most this many times the plugins); negative exports none.")
	flag.StringVar(&o.okgWebhook, "okg-webhook-configuration", okgguard.DefaultWebhookConfiguration, "kruise-game-manager's MutatingWebhookConfiguration: while it exists and OKG's provider configuration enables [kubernetes], this manager leaves the Kubernetes network types to OKG (not ready, pods passed through).")
	o.okgConfig = types.NamespacedName{Namespace: okgguard.DefaultConfigMapNamespace, Name: okgguard.DefaultConfigMapName}
	flag.Func("okg-config-map", "kruise-game-manager's provider configuration, <namespace>/<name> of the ConfigMap whose config.toml it mounts (default "+o.okgConfig.String()+"); the manager may get only a ConfigMap of that name (RBAC).", func(v string) error {
		ns, name, ok := strings.Cut(v, "/")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("want <namespace>/<name>, got %q", v)
		}
		o.okgConfig = types.NamespacedName{Namespace: ns, Name: name}
		return nil
	})
	flag.StringVar(&o.okgValidating, "okg-validating-webhook-configuration", okgvalidation.DefaultConfiguration, "kruise-game-manager's ValidatingWebhookConfiguration, whose GameServerSet entry ("+okgvalidation.EntryName+") refuses GameServerSets of network types OKG has not registered; the manager may patch only a configuration of that name (RBAC).")
	flag.BoolVar(&o.manageOKGValidation, "manage-okg-gameserverset-validation", false, "Keep a matchCondition ("+okgvalidation.ConditionName+") on kruise-game-manager's GameServerSet validating entry that skips GameServerSets of the network types this manager serves, which this manager validates instead; without it OKG refuses every new GameServerSet of those types. Removed while the manager steps back, and when false (with the manager's own GameServerSet entry made to match nothing). config/default and the chart turn it on.")
	removeCondition := flag.Bool("remove-okg-gameserverset-condition", false, "Remove this manager's matchCondition from kruise-game-manager's GameServerSet validating entry (--okg-validating-webhook-configuration) and exit: the chart's post-delete hook runs it, since an uninstalled manager no longer validates those GameServerSets.")
	waitForPodsGone := flag.String("wait-for-pods-gone", "", "With --remove-okg-gameserverset-condition: first wait, up to 3 minutes, until no pod of the manager's namespace (POD_NAMESPACE) matches this label selector (the manager's pods, which would put the condition back while they run).")
	showVersion := flag.Bool("version", false, "Print the version and the commit it was built from (the binary's Go build info), and exit.")
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println("network-plugin-policy manager", buildInfo())
		return
	}

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if *removeCondition {
		if err := removeOKGCondition(o.okgValidating, *waitForPodsGone); err != nil {
			ctrl.Log.Error(err, "Could not remove the condition from OKG's GameServerSet webhook")
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}

// heapLimitShare is the share of GOMEMLIMIT the Go heap is kept under: the Deployment sets
// GOMEMLIMIT to the container's memory limit (downward API, limits.memory), and the rest is
// for what the runtime holds outside the heap (stacks, the scavenger's lag), so that the
// garbage collector works harder before the kernel's OOM killer steps in.
const heapLimitShare = 0.9

// heapLimit lowers the Go runtime's memory limit to heapLimitShare of GOMEMLIMIT when that
// is set, and reports the limit in bytes and whether it lowered it. Without GOMEMLIMIT it
// changes nothing.
func heapLimit() (int64, bool) {
	if os.Getenv("GOMEMLIMIT") == "" {
		return 0, false
	}
	limit := debug.SetMemoryLimit(-1)
	if limit <= 0 || limit == math.MaxInt64 {
		return limit, false
	}
	lowered := int64(float64(limit) * heapLimitShare)
	debug.SetMemoryLimit(lowered)
	return lowered, true
}

// validate checks the retry flags: at least one worker, at least one Recreate a minute, an
// interval floor of at least network.DefaultMinRetryInterval (the trigger stamps have second
// precision) and a retry-state refresh of at least a minute.
func (o retryOptions) validate() error {
	if o.maxConcurrentReconciles < 1 {
		return fmt.Errorf("--max-concurrent-reconciles: want at least 1, got %d", o.maxConcurrentReconciles)
	}
	if o.maxRecreatesPerMinute < 1 {
		return fmt.Errorf("--max-recreates-per-namespace-per-minute: want at least 1, got %d", o.maxRecreatesPerMinute)
	}
	if o.minInterval < network.DefaultMinRetryInterval {
		return fmt.Errorf("--min-retry-interval: want at least %s (trigger stamps have second precision), got %s", network.DefaultMinRetryInterval, o.minInterval)
	}
	if o.stateRefresh < time.Minute {
		return fmt.Errorf("--retry-state-refresh: want at least 1m, got %s", o.stateRefresh)
	}
	return nil
}

// run builds the manager from o and runs it until SIGTERM or SIGINT.
func run(o options) error {
	log := ctrl.Log.WithName("setup")
	if o.webhook.caOverlap < time.Second {
		return fmt.Errorf("--ca-overlap: want at least 1s (longer than a Secret volume takes to update), got %s", o.webhook.caOverlap)
	}
	if err := o.retry.validate(); err != nil {
		return err
	}
	if limit, lowered := heapLimit(); lowered {
		log.Info("Go heap limit set below the container's memory limit", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"), "heapLimitBytes", limit)
	}
	ctx, draining := drainingContext(o.shutdownDelay)
	ownNS, err := managerNamespace(o.rootNamespace)
	if err != nil {
		return err
	}
	rootNS := cmp.Or(o.rootNamespace, ownNS)
	leaderNS := cmp.Or(o.leaderElectionNS, ownNS)

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(scheme))

	metrics := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure, TLSOpts: []func(*tls.Config){disableHTTP2}}
	if o.metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.WarningHandlerWithContext = newAPIWarnings()
	if incompatible, err := checkAPIServer(ctx, cfg, o.webhook.mutatingName); err != nil {
		// The check itself failed (an API error): exit, so that the kubelet restarts the
		// container and the check runs again.
		return err
	} else if incompatible != nil {
		// This API server cannot honour the pod webhook's matchConditions. Take no part:
		// inject no CA, write no webhook entry, run no controller and do not campaign for
		// the leader Lease; stay up, not ready, and say why.
		log.Error(incompatible, "Not starting: this API server cannot honour the webhook configuration's matchConditions")
		return serveIncompatible(ctx, o.probeAddr, incompatible)
	}
	// With certificate rotation, the webhook server serves its certificate through the gate
	// (setupCerts), which never serves one that the caBundle does not trust yet.
	webhookTLS := []func(*tls.Config){disableHTTP2}
	gate := &webhookcert.Gate{}
	if o.webhook.certRotation {
		webhookTLS = append(webhookTLS, func(c *tls.Config) { c.GetCertificate = gate.GetCertificate })
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: leaderNS,
		// The process exits as soon as the manager stops, so the Lease can be released at once:
		// in a rolling restart the other replica takes over the controllers without waiting
		// for the lease duration.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: drainingServer{Server: webhook.NewServer(webhook.Options{
			Port: o.webhook.port, CertDir: o.webhook.certDir, TLSOpts: webhookTLS,
		}), draining: draining},
		// The cache holds the game servers and the pods with host ports (the network
		// controller, the webhook's precheck, HostPort's state: kubernetes.CachesPod, a
		// client-side filter, since no selector can match an annotation) and every node
		// (node addresses): managedFields are most of a pod's bytes and nothing here reads
		// them; of a pod that is not a game server only what the HostPort allocator reads is
		// kept, and of a node not its image list (docs/deploy.md, sizing).
		Cache: cache.Options{
			NewInformer:      newInformer,
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:  {Transform: kubernetes.TransformPod},
				&corev1.Node{}: {Transform: kubernetes.TransformNode},
				// Only what the load-balancer plugins read: the Warning Events of Services.
				&corev1.Event{}: {Field: lb.EventSelector},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	// Events of one content are one Event object in the whole cluster, whichever replica
	// records them and however far apart (eventrecorder.StableNameSink).
	eventsClient, err := eventsv1client.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("create the events client: %w", err)
	}
	recorders, err := eventrecorder.NewProvider(ctx, eventsClient, scheme)
	if err != nil {
		return err
	}
	defer recorders.Shutdown()

	plugins, providerCfg, pluginsReady, err := setupPlugins(ctx, mgr, o.providerConfig, ownNS, o.ledgerName)
	if err != nil {
		return err
	}
	if err := setupStateMetrics(ctx, mgr, plugins, o.topNamespaces); err != nil {
		return err
	}
	store, storeSynced, err := setupPolicyStore(ctx, mgr, rootNS, plugins, o.webhook.timeout)
	if err != nil {
		return err
	}
	certsReady, certServed, err := setupCerts(mgr, o.webhook, ownNS, gate)
	if err != nil {
		return err
	}
	guard, err := setupOKGGuard(mgr, recorders, o.okgWebhook, o.okgValidating, o.okgConfig, plugins, providerCfg.EnabledProviders())
	if err != nil {
		return err
	}
	if err := setupOKGGameServerSetValidation(mgr, recorders, plugins, store, guard, o.okgValidating, o.webhook.validatingName, o.manageOKGValidation); err != nil {
		return err
	}
	self, err := ownUsername(ctx, cfg)
	if err != nil {
		return err
	}
	webhooksReady, err := setupWebhooks(ctx, mgr, webhookDeps{
		certsReady: certsReady, store: store, pluginsReady: pluginsReady, plugins: plugins, webhookTimeout: o.webhook.timeout,
		minRetryInterval: o.retry.minInterval,
		managerUsername:  self, recorders: recorders, stepBack: guard.StepBack,
		register: []func(ctrl.Manager) error{func(mgr ctrl.Manager) error {
			return policywebhook.SetupWebhookWithManager(mgr, policywebhook.Options{
				RootNamespace: rootNS, Plugins: pluginDescriptors(plugins), PodWebhookTimeout: o.webhook.timeout,
			})
		}},
	})
	if err != nil {
		return err
	}

	if err := setupControllers(mgr, recorders, store, plugins, o.webhook.mutatingName, webhooksReady, o.retry, guard, pluginsReady); err != nil {
		return err
	}

	if o.leaderElect {
		if err := mgr.Add(leaseVersion{reader: mgr.GetAPIReader(), writer: mgr.GetClient(),
			lease: types.NamespacedName{Namespace: leaderNS, Name: leaderElectionID}, info: buildInfo()}); err != nil {
			return fmt.Errorf("add the Lease version writer: %w", err)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	for name, check := range map[string]healthz.Checker{
		"policy-store": storeSynced,
		"plugins": func(*http.Request) error {
			if !pluginsReady.Load() {
				return errors.New("network plugins are not initialised")
			}
			return nil
		},
		"webhooks": webhooksReady,
		"draining": notDraining(draining),
		// Fails while kruise-game-manager still runs the plugins of every provider this
		// manager serves, with the reasons.
		"okg-coexistence": guard.Check,
		// nil without --cert-rotation.
		"webhook-certificate": certServed,
	} {
		if check == nil {
			continue
		}
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return fmt.Errorf("add ready check %s: %w", name, err)
		}
	}

	log.Info("Starting manager", "version", buildInfo().String(), "namespace", ownNS, "rootNamespace", rootNS, "leaderElection", o.leaderElect, "plugins", plugins.Names())
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// disableHTTP2 makes a TLS server offer HTTP/1.1 only, as kubebuilder's scaffolding does for
// its webhook and metrics servers: HTTP/2's stream reset and CONTINUATION flood attacks
// (CVE-2023-44487, CVE-2023-39325) cost a server more than HTTP/1.1 ever does, and the
// apiserver's webhook client spreads concurrent requests over several HTTP/1.1 connections,
// so over replicas behind the Service, instead of multiplexing them on one.
func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
