// Command pause is the sandbox ("pause") container of the real-node suite's containerd: it
// holds a pod's namespaces and does nothing until it is told to stop. Built into an image by
// `hack/image -test-images` (static, no shell).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
