package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
)

// module is one Go module linked into a shipped binary, as `go list -json=Module` reports it
// (a replaced module is reported by its replacement's version and directory).
type module struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *module
}

// shippedModules lists the modules that the packages pkgs depend on when built for each of
// goos, run in the module at root; sorted by path, each once. The standard library belongs to
// no module and is not listed (Go's own BSD-3-Clause license).
func shippedModules(root string, pkgs, goos []string) ([]module, error) {
	seen := map[string]module{}
	for _, g := range goos {
		args := append([]string{"list", "-deps", "-json=Module"}, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS="+g, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list for GOOS=%s: %w: %s", g, err, stderr.String())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct{ Module *module }
			if err := dec.Decode(&p); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decode go list output: %w", err)
			}
			if p.Module == nil {
				continue
			}
			m := *p.Module
			if m.Replace != nil {
				m.Version, m.Dir = m.Replace.Version, m.Replace.Dir
			}
			m.Replace = nil
			if m.Dir == "" {
				return nil, fmt.Errorf("module %s@%s has no directory: run go mod download", m.Path, m.Version)
			}
			seen[m.Path+"@"+m.Version] = m
		}
	}
	mods := make([]module, 0, len(seen))
	for _, m := range seen {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	return mods, nil
}
