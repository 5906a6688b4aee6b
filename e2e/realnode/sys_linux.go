package realnode

import "golang.org/x/sys/unix"

// unmount detaches the mount at path (MNT_DETACH: a busy mount goes once unused).
func unmount(path string) error { return unix.Unmount(path, unix.MNT_DETACH) }
