package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/google/licensecheck"
)

// allowed are the SPDX identifiers of the licenses this project, itself Apache-2.0, may ship
// in its binaries: the Apache Software Foundation's "category A" licenses
// (https://www.apache.org/legal/resolved.html) that its dependencies use. Copyleft licenses
// (GPL, LGPL, AGPL) and weak copyleft ones (MPL, EPL) are deliberately absent: a module under
// one of them fails the check until a maintainer decides and adds it here with a reason.
var allowed = map[string]string{
	"Apache-2.0":   "this project's own license",
	"MIT":          "permissive",
	"BSD-2-Clause": "permissive",
	"BSD-3-Clause": "permissive (Go, golang.org/x)",
	"ISC":          "permissive",
}

// defaultMinCoverage is the share of a license file's text, in percent, that licensecheck must
// attribute to known licenses; the rest (copyright lines, headings) is not license text. Real
// license files of the shipped modules score above 90; a file with extra terms scores lower
// and fails rather than passing on the part that was recognised.
const defaultMinCoverage = 80

// licenseFile matches the names of license files at a module's root: LICENSE, LICENCE,
// COPYING, with or without an extension or suffix (LICENSE.txt, LICENSE-MIT).
var licenseFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying)([.-].*)?$`)

// result is the verdict on one module.
type result struct {
	Module   module
	Licenses []string // SPDX identifiers found, sorted, each once
	Files    []string // license files read, relative to the module's directory
	Problem  string   // empty when the module passes
}

// String is one line of the report: path, version, licenses, files and the problem if any.
func (r result) String() string {
	v := r.Module.Version
	if r.Module.Main {
		v = "(this module)"
	}
	s := fmt.Sprintf("%-60s %-40s %-28s %s", r.Module.Path, v, strings.Join(r.Licenses, ","), strings.Join(r.Files, ","))
	if r.Problem != "" {
		s += "  PROBLEM: " + r.Problem
	}
	return s
}

// checkModule reads the license files at the root of m.Dir and judges them.
func checkModule(m module, minCoverage float64) result {
	r := result{Module: m}
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		r.Problem = fmt.Sprintf("read module directory: %v", err)
		return r
	}
	var scans []fileScan
	for _, e := range entries {
		if e.IsDir() || !licenseFile.MatchString(e.Name()) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(m.Dir, e.Name()))
		if err != nil {
			r.Problem = fmt.Sprintf("read %s: %v", e.Name(), err)
			return r
		}
		cov := licensecheck.Scan(text)
		ids := make([]string, 0, len(cov.Match))
		for _, match := range cov.Match {
			ids = append(ids, match.ID)
		}
		scans = append(scans, fileScan{Name: e.Name(), Percent: cov.Percent, IDs: ids})
		r.Files = append(r.Files, e.Name())
	}
	r.Licenses, r.Problem = judge(scans, minCoverage)
	return r
}

// fileScan is what licensecheck found in one license file.
type fileScan struct {
	Name    string
	Percent float64  // share of the text recognised, 0-100
	IDs     []string // SPDX identifiers of the matches
}

// judge returns the licenses found in scans and a problem: no license file, a file recognised
// below minCoverage percent or with no license at all, or a license not in allowed.
func judge(scans []fileScan, minCoverage float64) ([]string, string) {
	if len(scans) == 0 {
		return nil, "no license file (LICENSE, COPYING, ...) at the module's root"
	}
	set := map[string]bool{}
	var problems []string
	for _, s := range scans {
		if len(s.IDs) == 0 {
			problems = append(problems, fmt.Sprintf("%s: no known license recognised", s.Name))
			continue
		}
		if s.Percent < minCoverage {
			problems = append(problems, fmt.Sprintf("%s: only %.0f%% of the text is a known license (want %.0f%%): read it and decide",
				s.Name, s.Percent, minCoverage))
		}
		for _, id := range s.IDs {
			set[id] = true
		}
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
		if _, ok := allowed[id]; !ok {
			problems = append(problems, fmt.Sprintf("license %s is not allowed", id))
		}
	}
	sort.Strings(ids)
	sort.Strings(problems)
	return ids, strings.Join(problems, "; ")
}

// allowedList is the allowlist's identifiers, sorted, for the report.
func allowedList() []string {
	ids := make([]string, 0, len(allowed))
	for id := range allowed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
