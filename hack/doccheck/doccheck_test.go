package doccheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, from this package's directory.
const root = "../.."

// docFiles are the Markdown files the test reads: README.md and every file of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rel names path for messages.
func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	testName = regexp.MustCompile(`\bTest[A-Z0-9_]\w*\*?`)
	testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	makeCmd  = regexp.MustCompile(`^make ([a-zA-Z][\w-]*\*?)`)
	target   = regexp.MustCompile(`(?m)^([a-zA-Z][\w-]*):([^=]|$)`)
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// testInPackage is a backticked test name followed by its package in parentheses:
	// `TestX` (pkg/y), `TestX` (e2e/z: ...).
	testInPackage = regexp.MustCompile("`(Test\\w+)` \\(((?:pkg|e2e|hack|cmd|apis)/[\\w/]*\\w)")
)

// prose returns text without its fenced code blocks (```), whose contents are shell
// and YAML rather than prose.
func prose(text string) string {
	var b strings.Builder
	in := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestDocsNameTestsThatExist: every `Test...` name in a code span of README.md or docs/ is a
// test function somewhere in the repository (`TestX*`: one whose name starts so), and one
// followed by a package in parentheses (`TestX` (pkg/y)) is a test of that package.
func TestDocsNameTestsThatExist(t *testing.T) {
	tests := map[string]bool{}
	dirs := map[string][]string{} // test name to the directories (from root) that hold it
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			for _, m := range testFunc.FindAllStringSubmatch(read(t, path), -1) {
				tests[m[1]] = true
				dirs[m[1]] = append(dirs[m[1]], filepath.ToSlash(rel(filepath.Dir(path))))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 100 {
		t.Fatalf("found %d test functions: the walk missed the repository", len(tests))
	}
	for _, f := range docFiles(t) {
		text := prose(read(t, f))
		for _, span := range codeSpan.FindAllStringSubmatch(text, -1) {
			for _, name := range testName.FindAllString(span[1], -1) {
				if !matches(tests, name) {
					t.Errorf("%s: `%s` names %s, which is no test function", rel(f), span[1], name)
				}
			}
		}
		// `TestX` (pkg/y...): the package named right after it holds it.
		for _, m := range testInPackage.FindAllStringSubmatch(text, -1) {
			if tests[m[1]] && !slices.Contains(dirs[m[1]], m[2]) {
				t.Errorf("%s: %s is not a test of %s (it is in %v)", rel(f), m[1], m[2], dirs[m[1]])
			}
		}
	}
}

// TestDocsLinksResolve: every relative link of README.md and docs/ names a file or
// directory that exists, and its #anchor, if any, a heading of the Markdown file it names
// (GitHub's anchors).
func TestDocsLinksResolve(t *testing.T) {
	anchors := map[string][]string{}
	anchorsOf := func(path string) []string {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(read(t, path))
		anchors[path] = a
		return a
	}
	for _, f := range docFiles(t) {
		for _, m := range link.FindAllStringSubmatch(prose(read(t, f)), -1) {
			dest := m[1]
			if strings.Contains(dest, "://") || strings.HasPrefix(dest, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(dest, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %s: %s does not exist", rel(f), dest, rel(target))
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !slices.Contains(anchorsOf(target), anchor) {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", rel(f), dest, rel(target), anchor)
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown text: lower
// case, letters, digits, '-' and '_' kept, spaces made '-', everything else dropped; a
// repeated anchor gets -1, -2, ...
func headingAnchors(text string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range strings.Split(prose(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = a + "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

// matches reports whether name is in names, or, ending in '*', is a prefix of one of them.
func matches(names map[string]bool, name string) bool {
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		for n := range names {
			if strings.HasPrefix(n, prefix) {
				return true
			}
		}
		return false
	}
	return names[name]
}

// TestDocsMakeTargetsExist: every `make <target>` in a code span of README.md or docs/ names
// a target of the Makefile (`make x-*`: one whose name starts so).
func TestDocsMakeTargetsExist(t *testing.T) {
	targets := map[string]bool{}
	for _, m := range target.FindAllStringSubmatch(read(t, filepath.Join(root, "Makefile")), -1) {
		targets[m[1]] = true
	}
	if !targets["test"] || !targets["verify"] {
		t.Fatalf("Makefile targets %v: test or verify missing, the pattern is wrong", targets)
	}
	for _, f := range docFiles(t) {
		for _, span := range codeSpan.FindAllStringSubmatch(prose(read(t, f)), -1) {
			if m := makeCmd.FindStringSubmatch(strings.TrimSpace(span[1])); m != nil && !matches(targets, m[1]) {
				t.Errorf("%s: `%s`: the Makefile has no target %s", rel(f), span[1], m[1])
			}
		}
	}
}
