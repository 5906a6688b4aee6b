package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CloudReadinessGatePrefixes are the readiness gates a cloud's own controller sets on the
// pods behind its load balancers (Alibaba's cloud controller: service.readiness.alibabacloud.com/
// <Service>). The fake nodes' kwok stages leave them alone, so that only the cloud's
// stand-in (e2e/cloudbox) turns them True, as on a real cluster; kwok sets every other
// readiness gate True when a pod turns Ready.
var CloudReadinessGatePrefixes = []string{"service.readiness.alibabacloud.com/"}

// kwokGatesRange is the part of kwok's pod-ready Stage (kustomize/stage/pod/fast, kwok
// v0.8.0) that sets every readiness gate's condition True.
const kwokGatesRange = `{{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}`

// cloudStages writes into dir the kwok stages of binDir's KwokStagesFile with the readiness
// gates of CloudReadinessGatePrefixes left out of the pod-ready Stage (sprig's hasPrefix, a
// kwok template function), and returns its path. Errors: the file cannot be read or written,
// or it does not hold kwokGatesRange exactly once (a kwok upgrade changed its Stage: look at
// it again).
func cloudStages(binDir, dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(binDir, KwokStagesFile))
	if err != nil {
		return "", err
	}
	if n := strings.Count(string(b), kwokGatesRange); n != 1 {
		return "", fmt.Errorf("%s holds kwok's readiness-gate range %d times, want once: its pod-ready Stage changed", KwokStagesFile, n)
	}
	var skip []string
	for _, p := range CloudReadinessGatePrefixes {
		skip = append(skip, fmt.Sprintf("(hasPrefix %q .conditionType)", p))
	}
	cond := skip[0]
	if len(skip) > 1 {
		cond = "(or " + strings.Join(skip, " ") + ")"
	}
	gated := `{{ range .spec.readinessGates }}{{ if not ` + cond + ` }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}{{ end }}`
	out := filepath.Join(dir, KwokStagesFile)
	return out, os.WriteFile(out, []byte(strings.Replace(string(b), kwokGatesRange, gated, 1)), 0o644)
}
