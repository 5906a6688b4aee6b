package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
	"github.com/okg-extensions/network-plugin-policy/pkg/version"
)

// versionReport is the JSON output of `nppctl version`: nppctl's own version.Info and, with
// --live, the leader's as its Lease records it.
type versionReport struct {
	// Client is nppctl's build info with its CEL environment.
	Client version.Info `json:"client"`
	// Manager is the leader's version, revision and CEL environment from its Lease; nil
	// without --live or when the Lease records none.
	Manager *version.Info `json:"manager,omitempty"`
	// Warnings say how the two differ.
	Warnings []string `json:"warnings,omitempty"`
}

// newVersionCommand is `nppctl version`: the version, commit and CEL environment nppctl was
// built with, from its Go build info (version.Get), as text or, with -o json, as a JSON
// object (versionReport); with --live also the running manager's, from the annotations its
// leader writes on the leader-election Lease, with a warning when the two differ.
func newVersionCommand(s *streams, g *globalOptions) *cobra.Command {
	var (
		output, managerNamespace string
		live                     bool
		kube                     kubeFlags
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and CEL environment nppctl was built with (--live: and the running manager's)",
		Long: `version prints the version, commit and CEL environment (the Kubernetes version whose CEL
libraries compile and evaluate policy expressions) nppctl was built with. With --live it also
reads the running manager's, which its leader records on its leader-election Lease, and warns
when they differ: with another CEL environment nppctl may accept or decide an expression
otherwise than the webhook (exit code 1); with another revision its explain, test and diff
may decide otherwise (a warning only). It needs get on the Lease
network-plugin-policy.policy.game.kruise.io in the manager's namespace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return usageError("-o: %q is not one of json or empty (text)", output)
			}
			r := versionReport{Client: version.Get()}
			r.Client.CELEnvironment = policycel.CompatibilityVersion.String()
			skew := false
			if live {
				m, err := liveManagerVersion(cmd.Context(), &kube, cmp.Or(managerNamespace, g.rootNamespace))
				if err != nil {
					return err
				}
				r.Manager = m
				r.Warnings, skew = versionSkew(r.Client, m)
			}
			if output == "json" {
				b, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(s.out, string(b))
			} else {
				fmt.Fprintln(s.out, "nppctl", r.Client)
				if r.Manager != nil {
					fmt.Fprintln(s.out, "manager", r.Manager)
				}
				for _, w := range r.Warnings {
					fmt.Fprintln(s.errOut, "Warning:", w)
				}
			}
			if skew {
				return errInvalid
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "Output format: empty for text, or json.")
	f.BoolVar(&live, "live", false, "Also read the running manager's version from its leader-election Lease, and warn on skew.")
	f.StringVar(&managerNamespace, "manager-namespace", "", "The manager's namespace (its Lease); default --root-namespace.")
	kube.bind(f)
	return cmd
}

// liveManagerVersion reads the leader's version.Info from the Lease annotations in
// namespace; nil when the Lease has none (no leader yet, or a manager that does not record
// it). Errors are I/O errors (exit 2).
func liveManagerVersion(ctx context.Context, kube *kubeFlags, namespace string) (*version.Info, error) {
	c, err := kube.connect()
	if err != nil {
		return nil, err
	}
	lease, err := c.core.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return nil, &ioError{fmt.Errorf("get the manager's Lease %s/%s: %w", namespace, leaseName, err)}
	}
	info, ok := version.FromAnnotations(lease.Annotations)
	if !ok {
		return nil, nil
	}
	return &info, nil
}

// versionSkew returns warnings on how client and manager differ, and whether the difference
// may change decisions (another CEL environment). A nil manager is a warning that nothing
// is recorded.
func versionSkew(client version.Info, manager *version.Info) ([]string, bool) {
	if manager == nil {
		return []string{"the manager's Lease records no version: no leader has been elected yet, or the manager is older than this nppctl"}, false
	}
	var warnings []string
	skew := false
	if manager.CELEnvironment != client.CELEnvironment {
		skew = true
		warnings = append(warnings, fmt.Sprintf("CEL environment skew: the manager evaluates policies with %s, nppctl with %s; an expression may be accepted or decided otherwise",
			cmp.Or(manager.CELEnvironment, "unknown"), client.CELEnvironment))
	}
	switch {
	case manager.Revision == "" || client.Revision == "":
		if manager.Version != client.Version {
			warnings = append(warnings, fmt.Sprintf("version skew: the manager is %s, nppctl %s", manager.Version, client.Version))
		}
	case manager.Revision != client.Revision:
		warnings = append(warnings, fmt.Sprintf("revision skew: the manager was built from %s, nppctl from %s; explain, test and diff may decide otherwise than the webhook",
			manager.Revision, client.Revision))
	}
	return warnings, skew
}
