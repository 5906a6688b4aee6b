package realnode

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// GameImages are the images real nodes need to run game servers: the docker archives to
// import into each node's containerd, and the references of the sandbox (pause) and the
// echo game server among them.
type GameImages struct {
	Archives    []string
	Pause, Echo string
}

// BuildGameImages builds the sandbox and echo game-server images (hack/image -test-images of
// the repository at root, linux/amd64) into dir. Errors carry the builder's output.
func BuildGameImages(root, dir string) (GameImages, error) {
	var imgs GameImages
	out, err := goRun(filepath.Join(root, "hack", "image"), "-test-images", "-platforms", "linux/amd64", "-root", root, "-out", dir)
	if err != nil {
		return imgs, fmt.Errorf("build the test images: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ref := strings.Fields(line)[0]
		switch {
		case strings.Contains(ref, "/npp-pause:"):
			imgs.Pause = ref
		case strings.Contains(ref, "/npp-echo:"):
			imgs.Echo = ref
		}
	}
	if imgs.Pause == "" || imgs.Echo == "" {
		return imgs, fmt.Errorf("build the test images: no pause or echo reference in %q", out)
	}
	imgs.Archives = []string{filepath.Join(dir, "npp-pause-linux-amd64.docker.tar"), filepath.Join(dir, "npp-echo-linux-amd64.docker.tar")}
	return imgs, nil
}

// goRun runs `go run . args` in dir and returns its standard output; errors carry its
// standard error.
func goRun(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"run", "."}, args...)...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}
