package cluster

import (
	"context"
	"os"
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
// os.Exit(cluster.Main(m, &cp, "../../crds")). It sets *cp before the tests run. When the
// control plane does not start it prints why and returns 1 without running the tests. A test
// binary that dies without returning (a panic, -timeout) still takes the processes with it
// through their parent-death signal.
func Main(m *testing.M, cp **ControlPlane, crdDirs ...string) int {
	c, err := Start(context.Background(), Options{Log: os.Stderr})
	if err != nil {
		os.Stderr.WriteString("start control plane: " + err.Error() + "\n")
		return 1
	}
	defer c.Stop()
	if len(crdDirs) > 0 {
		if _, err := InstallCRDs(c.Config, crdDirs...); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			return 1
		}
	}
	*cp = c
	return m.Run()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
