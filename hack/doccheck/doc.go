// Package doccheck holds the test that keeps README.md and docs/ true to the repository:
// every backticked test name is a test function, every relative link resolves (its file and
// its heading anchor), and every quoted `make` target is one of the Makefile's. It has no
// code of its own.
package doccheck
