package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/okg-extensions/network-plugin-policy/pkg/version"
)

// newVersionCommand is `nppctl version`: the version and commit nppctl was built from, from
// its Go build info (version.Get), as text or, with -o json, as a JSON object (version.Info).
func newVersionCommand(s *streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit nppctl was built from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info := version.Get()
			switch output {
			case "":
				_, err := fmt.Fprintln(s.out, "nppctl", info)
				return err
			case "json":
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(s.out, string(b))
				return err
			default:
				return usageError("-o: %q is not one of json or empty (text)", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: empty for text, or json.")
	return cmd
}
