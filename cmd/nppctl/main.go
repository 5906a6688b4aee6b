// Command nppctl validates, tests and explains NetworkPluginPolicies offline, from the files
// of a Git repository, and against a live cluster: the same policy engine (pkg/policy), CEL
// environment, cost limits and plugin registry (pkg/plugin) as the manager's webhooks, so
// that what it prints is what the webhook decides. Installed as kubectl-npp it is the
// kubectl plugin `kubectl npp`. docs/nppctl.md documents the commands.
//
// Exit codes: 0 success, 1 invalid input or a failed check (validate found problems, a test
// case failed, diff found changes, explain could not decide a pod), 2 usage or I/O error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Exit codes.
const (
	exitOK      = 0
	exitInvalid = 1
	exitUsage   = 2
)

// exitError carries an exit code; its message, if any, is printed to stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// errInvalid is returned by a command that printed its findings and must exit 1.
var errInvalid = &exitError{code: exitInvalid}

// kubectlPluginName is the binary name under which kubectl runs nppctl as `kubectl npp`.
const kubectlPluginName = "kubectl-npp"

func main() {
	// The policy store and resolver log through controller-runtime; the CLI reports instead.
	ctrl.SetLogger(logr.Discard())
	os.Exit(run(filepath.Base(os.Args[0]), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit code. name is the binary's base
// name: kubectl-npp shows usage as `kubectl npp`.
func run(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(&streams{in: stdin, out: stdout, errOut: stderr})
	if name == kubectlPluginName {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl npp"}
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "Error: %v\n", ee.err)
		}
		return ee.code
	}
	var ioe *ioError
	if errors.As(err, &ioe) {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitUsage
	}
	// cobra's own errors: unknown flags, wrong argument counts.
	fmt.Fprintf(stderr, "Error: %v\n", err)
	return exitUsage
}

// streams are the command's standard input, output and error.
type streams struct {
	in          io.Reader
	out, errOut io.Writer
}

// globalOptions are the flags every command has.
type globalOptions struct {
	// rootNamespace is the manager's --root-namespace: its policies are cluster-wide.
	rootNamespace string
	// defaultNamespace is given to objects read from files without metadata.namespace, as
	// kubectl apply does.
	defaultNamespace string
	// providerConfig is the manager's --provider-config file; empty means the built-in
	// defaults (the Kubernetes-* plugins enabled), or providerConfigData.
	providerConfig string
	// providerConfigData, when providerConfig is empty, is a provider configuration read
	// from the cluster (explain --live: the manager's ConfigMap), named by
	// providerConfigSource in errors.
	providerConfigData   []byte
	providerConfigSource string
}

func newRootCommand(s *streams) *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "nppctl",
		Short: "Validate, test and explain NetworkPluginPolicies, offline or against a cluster",
		Long: `nppctl validates, tests and explains NetworkPluginPolicies from files (GitOps) or from a
cluster, with the manager's own policy engine, CEL environment, cost limits and plugin
registry. Exit codes: 0 success, 1 invalid input or failed check, 2 usage or I/O error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.rootNamespace, "root-namespace", "network-plugin-policy-system",
		"The manager's --root-namespace: the namespace whose policies are cluster-wide.")
	root.PersistentFlags().StringVar(&g.defaultNamespace, "default-namespace", "default",
		"Namespace of objects read from files without metadata.namespace (kubectl apply's default).")
	root.PersistentFlags().StringVar(&g.providerConfig, "provider-config", "",
		"The manager's --provider-config TOML file, for the registered plugins; empty means the built-in defaults.")
	root.AddCommand(newValidateCommand(s, g), newExplainCommand(s, g), newTestCommand(s, g), newDiffCommand(s, g), newStatusCommand(s, g), newPreflightCommand(s, g), newVersionCommand(s, g))
	return root
}

// usageError returns an exit-2 error.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}
