package main

import (
	"context"
	"fmt"
	"os"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/providers"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// newRegistry returns the plugin registry the manager builds from the same provider
// configuration (providers.Plugins: the Kubernetes plugins, and those of every cloud
// provider the configuration enables), for plugin names, aliases, built-in failure modes and
// the network view of the network-conf rules. The plugins are not initialised: only a Test
// case that checks a plugin's run (simulator) runs plugins, each on a registry of its own.
// A --provider-config file that cannot be read is an I/O error (the manager falls back to
// the defaults instead; a CLI given a path means it).
func newRegistry(_ context.Context, g *globalOptions) (*plugin.Registry, error) {
	cfg, err := providerConfig(g)
	if err != nil {
		return nil, err
	}
	return plugin.NewRegistry(providers.Plugins(cfg)...)
}

// providerConfig returns the --provider-config file's configuration, or the defaults
// without one. An unreadable file is an ioError, an invalid one a usage error.
func providerConfig(g *globalOptions) (plugin.Config, error) {
	if g.providerConfig == "" && g.providerConfigData != nil {
		cfg, err := plugin.ParseConfig(g.providerConfigData)
		if err != nil {
			return plugin.Config{}, &ioError{fmt.Errorf("provider config %s: %w", g.providerConfigSource, err)}
		}
		return cfg, nil
	}
	if g.providerConfig == "" {
		return plugin.DefaultConfig(), nil
	}
	data, err := os.ReadFile(g.providerConfig)
	if err != nil {
		return plugin.Config{}, &ioError{fmt.Errorf("read provider config: %w", err)}
	}
	cfg, err := plugin.ParseConfig(data)
	if err != nil {
		return plugin.Config{}, usageError("provider config %s: %w", g.providerConfig, err)
	}
	return cfg, nil
}

// descriptors describes the registered plugins to the policy engine, as the manager does.
func descriptors(r *plugin.Registry) []policy.Plugin {
	var out []policy.Plugin
	for _, p := range r.List() {
		out = append(out, describePlugin(p))
	}
	return out
}

func describePlugin(p plugin.Plugin) policy.Plugin {
	return policy.Plugin{Name: p.Name(), Alias: p.Alias(), Synchronous: p.IsSynchronous()}
}
