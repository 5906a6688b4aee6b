package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StartForTest starts a control plane for t, logging its progress with t.Log, and stops it
// in t.Cleanup. It fails t when the control plane does not start. Tests of one package should
// share one control plane (see Main) rather than start one each: on 2 cores a start takes
// several seconds.
func StartForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.Log == nil {
		opts.Log = testWriter{t}
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Main runs the tests of a package against one shared control plane with the CRDs of
// crdDirs installed, and stops it when they end: call it from TestMain as
// os.Exit(cluster.Main(m, &cp, "../../crds")). It sets *cp before the tests run. It is
// RunSuite without fake nodes or a manager.
func Main(m *testing.M, cp **ControlPlane, crdDirs ...string) int {
	return RunSuite(m, SuiteOptions{CRDDirs: crdDirs}, func(s *Suite) error {
		*cp = s.ControlPlane
		return nil
	})
}

// SuiteOptions says what RunSuite starts for the tests of one e2e package.
type SuiteOptions struct {
	// Cluster are the control plane's options (fake nodes, hollow nodes); Log defaults to
	// os.Stderr.
	Cluster Options
	// CRDDirs are installed before the tests (paths relative to the test's package).
	CRDDirs []string
	// ProviderConfig is the text of the manager's provider configuration (OKG's TOML),
	// written to provider.toml in the control plane's directory; empty writes no file.
	ProviderConfig string
	// Manager, when not nil, starts the manager as deployed (StartManager) before the tests,
	// with ProviderConfig set to the written file; its logs' tails are printed when a test
	// fails. Nil leaves starting it to the tests.
	Manager *ManagerOptions
}

// Suite is what RunSuite started, handed to its ready function before the tests run.
type Suite struct {
	ControlPlane *ControlPlane
	// ProviderConfig is the path of the written provider configuration, empty when none.
	ProviderConfig string
	// Manager is the started manager, nil unless SuiteOptions.Manager was set.
	Manager *Manager
}

// RunSuite runs the tests of a package against one shared control plane and, when asked,
// one manager run as deployed, and stops everything when they end; call it from TestMain as
// os.Exit(cluster.RunSuite(m, opts, ready)). ready (the package's own set-up: its clients,
// its package variables) runs once everything has started, before the tests. When a start
// or ready fails, RunSuite prints why and returns 1 without running the tests. A test binary
// that dies without returning (a panic, -timeout) still takes the processes with it through
// their parent-death signal.
func RunSuite(m *testing.M, opts SuiteOptions, ready func(*Suite) error) int {
	ctx := context.Background()
	if opts.Cluster.Log == nil {
		opts.Cluster.Log = os.Stderr
	}
	c, err := Start(ctx, opts.Cluster)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		return 1
	}
	defer c.Stop()
	if len(opts.CRDDirs) > 0 {
		if _, err := InstallCRDs(c.Config, opts.CRDDirs...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	s := &Suite{ControlPlane: c}
	if opts.ProviderConfig != "" {
		s.ProviderConfig = filepath.Join(c.Dir, "provider.toml")
		if err := os.WriteFile(s.ProviderConfig, []byte(opts.ProviderConfig), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if opts.Manager != nil {
		mo := *opts.Manager
		if s.ProviderConfig != "" {
			mo.ProviderConfig = s.ProviderConfig
		}
		if s.Manager, err = c.StartManager(ctx, mo); err != nil {
			fmt.Fprintln(os.Stderr, "start manager:", err)
			return 1
		}
	}
	if err := ready(s); err != nil {
		fmt.Fprintln(os.Stderr, "set up the tests:", err)
		return 1
	}
	code := m.Run()
	if code != 0 && s.Manager != nil {
		fmt.Fprintf(os.Stderr, "manager logs:\n%s\n", s.Manager.LogTails(20000))
	}
	return code
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
