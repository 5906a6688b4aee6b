// Command licenses checks the license of every Go module linked into what this project ships:
// the manager and nppctl (kubectl-npp) binaries, built for each operating system a release
// builds them for (linux, darwin, windows). The list of modules comes from
// `go list -deps` of ./cmd/manager and ./cmd/nppctl, so the tool modules under hack/ (which
// never ship) are not part of it. Each module's license files are identified with
// github.com/google/licensecheck and every license found must be on the allowlist below.
//
// Usage, from the repository root (`make licenses`, part of `make verify`):
//
//	go run ./hack/licenses -root .
//
// It prints one line per module (path, version, licenses, file) and exits 1 when a module has
// no license file, a license file that is not recognised well enough (coverage below
// -min-coverage percent), or a license that is not on the allowlist.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// buildGOOS are the operating systems the release builds kubectl-npp for (the manager is
// linux only); dependencies that differ by GOOS are the union of all three.
var buildGOOS = []string{"linux", "darwin", "windows"}

// shippedPackages are the main packages whose dependencies ship in the release.
var shippedPackages = []string{"./cmd/manager", "./cmd/nppctl"}

func main() {
	root := flag.String("root", ".", "repository root: the module whose binaries ship")
	minCoverage := flag.Float64("min-coverage", defaultMinCoverage,
		"percent of a license file's text that licensecheck must recognise")
	flag.Parse()

	abs, err := filepath.Abs(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mods, err := shippedModules(abs, shippedPackages, buildGOOS)
	if err != nil {
		fmt.Fprintln(os.Stderr, "licenses:", err)
		os.Exit(2)
	}
	failures := 0
	for _, m := range mods {
		r := checkModule(m, *minCoverage)
		fmt.Println(r.String())
		if r.Problem != "" {
			failures++
		}
	}
	fmt.Printf("%d modules linked into %v for %v; %d with a problem\n",
		len(mods), shippedPackages, buildGOOS, failures)
	if failures > 0 {
		fmt.Println("allowed licenses:", allowedList())
		os.Exit(1)
	}
}
