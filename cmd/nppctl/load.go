package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// stdinPath is the PATH argument that reads standard input.
const stdinPath = "-"

// document is one YAML or JSON document of an input file.
type document struct {
	// file is the path as given (or as found under a given directory); "<stdin>" for "-".
	file string
	// index is the document's position in its file, from 1, counting non-empty documents.
	index int
	// raw is the document as JSON.
	raw []byte
	// obj is the document as an object; nil when err is set.
	obj *unstructured.Unstructured
	// err says why the document is not a Kubernetes object (not YAML, not a map, no kind).
	err error
}

// where returns "file:index", the prefix of every message about the document.
func (d *document) where() string { return fmt.Sprintf("%s:%d", d.file, d.index) }

// gvk returns the document's apiVersion and kind.
func (d *document) gvk() schema.GroupVersionKind { return d.obj.GroupVersionKind() }

// describe returns "apiVersion Kind namespace/name" for notes.
func (d *document) describe() string {
	name := d.obj.GetName()
	if ns := d.obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %s %s", d.obj.GetAPIVersion(), d.obj.GetKind(), name)
}

// ioError is an input that cannot be read (a missing file, a directory without manifests):
// exit code 2, unlike a document that is read but invalid.
type ioError struct{ err error }

func (e *ioError) Error() string { return e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

// manifestExtensions are the file name extensions read under a directory; a file named
// explicitly is read whatever its name.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// readPaths reads every document of paths: files, directories (walked recursively, files
// with a manifestExtensions extension, in lexical order) and "-" for stdin (which can be read
// only once: a second "-" reads nothing).
// Errors (*ioError): a path that cannot be read.
func readPaths(paths []string, stdin io.Reader) ([]*document, error) {
	var docs []*document
	for _, p := range paths {
		if p == stdinPath {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, &ioError{fmt.Errorf("read stdin: %w", err)}
			}
			docs = append(docs, splitDocuments("<stdin>", data)...)
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, &ioError{err}
		}
		if !info.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, &ioError{err}
			}
			docs = append(docs, splitDocuments(p, data)...)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !slices.Contains(manifestExtensions, strings.ToLower(filepath.Ext(path))) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			docs = append(docs, splitDocuments(path, data)...)
			return nil
		})
		if err != nil {
			return nil, &ioError{err}
		}
	}
	return docs, nil
}

// splitDocuments splits data at YAML document separators ("---" lines) and decodes each
// document; documents holding only comments or null are dropped and not counted. A
// document that is not an object keeps its error. A JSON file is one document.
func splitDocuments(file string, data []byte) []*document {
	var docs []*document
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		d := &document{file: file, index: len(docs) + 1}
		if err != nil {
			d.err = fmt.Errorf("read document: %w", err)
			docs = append(docs, d)
			break
		}
		if isBlank(chunk) {
			continue
		}
		if d.raw, d.err = yaml.YAMLToJSON(chunk); d.err != nil {
			d.err = fmt.Errorf("not YAML or JSON: %w", d.err)
			docs = append(docs, d)
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal(d.raw, &obj); err != nil {
			d.err = fmt.Errorf("not a Kubernetes object (a map with apiVersion and kind): %w", err)
			docs = append(docs, d)
			continue
		}
		if obj == nil {
			continue // "null"
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			d.err = errors.New("not a Kubernetes object: apiVersion and kind are required")
		} else {
			d.obj = u
		}
		docs = append(docs, d)
	}
	return docs
}

// isBlank reports whether a YAML document holds only white space, comments and separators.
func isBlank(chunk []byte) bool {
	for _, line := range bytes.Split(chunk, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}

// eachOfKind calls fn with every object of kind among docs that decoded, also inside a List
// or a <kind>List (an item without a kind counts as kind, as kubectl writes them).
func eachOfKind(docs []*document, kind string, fn func(obj map[string]any)) {
	var walk func(obj map[string]any)
	walk = func(obj map[string]any) {
		switch obj["kind"] {
		case "List", kind + "List":
			items, _ := obj["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					if m["kind"] == nil {
						m["kind"] = kind
					}
					walk(m)
				}
			}
		case kind:
			fn(obj)
		}
	}
	for _, d := range docs {
		if d.err == nil {
			walk(d.obj.Object)
		}
	}
}
