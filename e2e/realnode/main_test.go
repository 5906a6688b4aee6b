package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// envImages carries the suite's images (testImages, JSON) to its inner run.
const envImages = "NPP_REALNODE_IMAGES"

// harness is the inner run's namespace and working directory; images are the suite's images
// (testImages), built by the outer run: inside the namespace the Go module proxy cannot be
// reached.
var (
	harness *Harness
	images  testImages
)

// TestMain runs the suite isolated (Isolated): the outer run on the host builds the images,
// runs the test binary again inside a network namespace, and afterwards fails when the host
// is not as it was. Inside, it runs the tests.
func TestMain(m *testing.M) {
	if harness = InIsolation(); harness != nil {
		// envtest's CRD installer logs through controller-runtime's logger.
		ctrllog.SetLogger(logr.Discard())
		if err := json.Unmarshal([]byte(os.Getenv(envImages)), &images); err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", envImages+":", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	if why := Unsupported(os.Getenv("KUBEBUILDER_ASSETS")); why != "" {
		fmt.Println("realnode: skipped, the real-node suite needs", why)
		os.Exit(0)
	}
	os.Exit(Isolated("npp-rn", func(dir string) ([]string, error) {
		imgs, err := buildTestImages(filepath.Join(dir, "images"))
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(imgs)
		return []string{envImages + "=" + string(b)}, err
	}))
}
