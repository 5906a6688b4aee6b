//go:build !linux

package realnode

import "errors"

// unmount is Linux only; the suite runs nowhere else.
func unmount(string) error { return errors.New("unmount: Linux only") }
