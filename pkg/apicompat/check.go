package apicompat

import (
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

// MinServerVersion is the oldest Kubernetes API server the manager supports: 1.30, where
// admission webhook matchConditions are generally available and always on (KEP-3716: beta
// and on by default in 1.28 and 1.29, where a cluster could still turn the feature gate
// AdmissionWebhookMatchConditions off).
var MinServerVersion = version.MajorMinor(1, 30)

// CheckServerVersion asks the API server for its version (d.ServerVersion) and returns an
// error naming it and MinServerVersion when it is older, or when the version cannot be read
// or parsed (the GitVersion of a build without a version stamp, v0.0.0-master, is older).
func CheckServerVersion(d discovery.ServerVersionInterface) error {
	info, err := d.ServerVersion()
	if err != nil {
		return fmt.Errorf("read the API server's version: %w", err)
	}
	return CheckVersion(info)
}

// CheckVersion returns an error naming the API server's version (info.GitVersion) and
// MinServerVersion when it is older or does not parse.
func CheckVersion(info *apiversion.Info) error {
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return fmt.Errorf("parse the API server's version %q: %w", info.GitVersion, err)
	}
	if v.LessThan(MinServerVersion) {
		return fmt.Errorf("the API server is Kubernetes %s; network-plugin-policy needs %d.%d or later, where admission webhook matchConditions are always honoured: on an older API server the pod webhook's failurePolicy Fail entry would intercept every pod in the cluster",
			info.GitVersion, MinServerVersion.Major(), MinServerVersion.Minor())
	}
	return nil
}

// CheckMatchConditions returns an error when one of the named webhook entries of cfg, as
// the API server stored it, has no matchConditions (the API server drops the field when it
// cannot honour it), or when one of them is missing from cfg.
func CheckMatchConditions(cfg *admissionregistrationv1.MutatingWebhookConfiguration, entries ...string) error {
	for _, name := range entries {
		i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == name })
		if i < 0 {
			return fmt.Errorf("MutatingWebhookConfiguration %s has no entry %s", cfg.Name, name)
		}
		if len(cfg.Webhooks[i].MatchConditions) == 0 {
			return fmt.Errorf("entry %s of MutatingWebhookConfiguration %s is stored without matchConditions: the API server does not honour them, so the entry would intercept every pod in the cluster",
				name, cfg.Name)
		}
	}
	return nil
}
