package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
)

// Load tools' client limits: far above what one process can send, so that the client never
// throttles the load it measures.
const (
	loadClientQPS   = 50000
	loadClientBurst = 100000
)

// LoadOptions configure StartForLoad.
type LoadOptions struct {
	// Dir is the cluster's working directory, kept afterwards (made absolute and created);
	// empty means a new temporary one, removed by Stop.
	Dir string
	// FakeNodes is the number of kwok nodes.
	FakeNodes int
	// CRDs is the directory of the CRD YAML files to install.
	CRDs string
	// APIServerFlags are extra or overriding kube-apiserver flags (Options.APIServerFlags).
	APIServerFlags map[string]string
	// KeepWarnings keeps the API server's warnings in the client's log; false drops them
	// (a load tool would log one per pod).
	KeepWarnings bool
}

// StartForLoad starts the control plane of a load tool (e2e/cmd/...): the cluster in Dir
// with FakeNodes kwok nodes and its log on standard error, the CRDs installed, and returns it
// with an admin client configuration whose QPS and burst never throttle (50,000 and
// 100,000). The caller stops the cluster. Errors name the step that failed; the cluster is
// stopped then.
func StartForLoad(ctx context.Context, o LoadOptions) (*ControlPlane, *rest.Config, error) {
	if o.Dir != "" {
		dir, err := filepath.Abs(o.Dir)
		if err != nil {
			return nil, nil, fmt.Errorf("resolve -dir: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("create %s: %w", dir, err)
		}
		o.Dir = dir
	}
	cp, err := Start(ctx, Options{Dir: o.Dir, Log: os.Stderr, FakeNodes: o.FakeNodes, APIServerFlags: o.APIServerFlags})
	if err != nil {
		return nil, nil, fmt.Errorf("start cluster: %w", err)
	}
	if _, err := InstallCRDs(cp.Config, o.CRDs); err != nil {
		cp.Stop()
		return nil, nil, err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = loadClientQPS, loadClientBurst
	if !o.KeepWarnings {
		cfg.WarningHandler = rest.NoWarnings{}
	}
	return cp, cfg, nil
}
