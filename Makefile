# network-plugin-policy: run `make help` for the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
TOOLS_MOD := $(ROOT)/hack/tools/go.mod
GO_TOOL := go tool -modfile=$(TOOLS_MOD)
CONTROLLER_GEN := $(GO_TOOL) controller-gen
# golangci-lint v2 with kube-api-linter built in, at the versions hack/lint/go.mod pins.
GOLANGCI_LINT := go tool -modfile=$(ROOT)/hack/lint/go.mod golangci-lint-kube-api-linter
# Prometheus's promtool, built from the module proxy at the version hack/observability/go.mod pins.
PROMTOOL := $(BIN)/promtool

# Kubernetes version of the local control plane: derived from go.mod's k8s.io/api (v0.X.Y -> X.Y),
# never written here as a literal.
KUBE_VERSION := $(shell go list -m -f '{{.Version}}' k8s.io/api | sed 's/^v0\./1./')
CONTROLPLANE_DIR := $(BIN)/k8s/$(KUBE_VERSION)-$(shell go env GOOS)-$(shell go env GOARCH)

# Every `go test` of `make test` has an explicit timeout: at least twice the longest run of
# that target's test binaries in a cold run on 2 cores, with room for a busier machine
# (docs/development.md#time-budget, measured with hack/ci-timings.sh). A timeout bounds each
# test binary's run, the builds it starts itself (hack/image's, e2e's) included, but not the
# compile of the test binary.
UNIT_TIMEOUT ?= 5m
OBSERVABILITY_TIMEOUT ?= 2m
IMAGE_TIMEOUT ?= 10m
CHART_TIMEOUT ?= 2m
E2E_TIMEOUT ?= 30m
# FUZZ_TIMEOUT bounds each fuzz target's start and its replay (hack/fuzz.sh); with -fuzz, go
# test runs the seed corpus inside the fuzzing, after it has stopped its timer, so FUZZTIME
# bounds that.
FUZZ_TIMEOUT ?= 2m
export FUZZ_TIMEOUT

# Packages: unit tests need no binaries; e2e packages start a real control plane.
UNIT_PKGS = $(shell go list ./... | grep -v '/e2e')
E2E_PKGS = ./e2e/...

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy (controller-gen), pkg/client (kube_codegen.sh) and hack/controlplane's go.mod and compat.mod.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...
	hack/update-codegen.sh
	hack/controlplane/gen-go-mod.sh
	cd hack/controlplane && GOFLAGS=-mod=mod go mod tidy
	hack/controlplane/gen-go-mod.sh v$(COMPAT_KUBE_VERSION) hack/controlplane/compat.mod
	cd hack/controlplane && GOFLAGS=-mod=mod go mod tidy -modfile=compat.mod

.PHONY: manifests
manifests: ## Regenerate crds/, the RBAC and webhook manifests under config/ (controller-gen), the chart's generated parts and the Grafana dashboard (hack/observability).
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=crds
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths="./cmd/...;./pkg/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths="./pkg/..." output:webhook:artifacts:config=config/webhook
	cd hack/chart && go run . -root ../..
	cd hack/observability && go run .

.PHONY: fmt
fmt: ## Run gofmt on the module.
	gofmt -s -w $$(git ls-files -co --exclude-standard '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet ## Run the linters: go vet, the gofmt check, and golangci-lint with kube-api-linter on apis/ (.golangci.yaml; hack/lint pins them).
	@out=$$(gofmt -s -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...

.PHONY: licenses
licenses: ## Check the license of every module linked into the manager and nppctl (linux, darwin, windows) against hack/licenses' allowlist, with github.com/google/licensecheck.
	cd hack/licenses && go test -count=1 -timeout 5m ./... && go run . -root $(ROOT)

.PHONY: verify
verify: generate manifests fmt lint licenses ## Regenerate everything (the chart's README among it), check the shipped modules' licenses and the chart's values schema, and fail on any diff or untracked file.
	go mod tidy -diff
	cd hack/tools && go mod tidy -diff
	cd hack/lint && go mod tidy -diff
	cd hack/etcd && go mod tidy -diff
	cd hack/kwok && go mod tidy -diff
	cd hack/containerd && go mod tidy -diff
	cd hack/image && go mod tidy -diff && go vet ./...
	cd hack/chart && go mod tidy -diff && go vet ./... && go test -count=1 -timeout $(CHART_TIMEOUT) -run 'TestValuesSchema|TestChartLints' ./...
	cd hack/observability && go mod tidy -diff
	cd hack/licenses && go mod tidy -diff && go vet ./...
	@if [ -n "$$(git status --porcelain --untracked-files=all)" ]; then \
	  echo "verify: the tree differs from what is committed after regeneration:"; \
	  git status --short --untracked-files=all; git --no-pager diff --stat; exit 1; fi

##@ Test

.PHONY: test
test: test-unit test-nppctl test-observability test-image test-chart test-fuzz test-e2e ## Run unit tests, the GitOps example through nppctl, the alert rules through promtool and the dashboard's queries through the PromQL parser, the image build, the Helm chart, bounded fuzzing and the e2e suite against a real cluster (the README's test command).

.PHONY: test-unit
test-unit: ## Run unit tests (no binaries needed).
	go test -count=1 -timeout $(UNIT_TIMEOUT) $(UNIT_PKGS)

.PHONY: test-image
test-image: ## Build every image twice for this machine's linux architecture and check that the digests and bytes match and what the images hold (hack/image); make release checks every platform it ships.
	cd hack/image && go test -count=1 -timeout $(IMAGE_TIMEOUT) ./...

.PHONY: test-chart
test-chart: ## Lint the Helm chart and check that it renders config/default's objects and its values (hack/chart, with the Helm SDK).
	cd hack/chart && go test -count=1 -timeout $(CHART_TIMEOUT) ./...

.PHONY: test-nppctl
test-nppctl: build ## Validate config/samples/ (recursively) and run the Test manifests of the GitOps example (config/samples/gitops/) and of the network-conf rules (config/samples/network-conf-rules-test/) with nppctl, as a CI pipeline would.
	$(BIN)/nppctl validate config/samples/
	$(BIN)/nppctl test config/samples/gitops/
	$(BIN)/nppctl --provider-config config/samples/network-conf-rules-test/provider.toml test config/samples/network-conf-rules-test/

$(PROMTOOL): hack/observability/go.mod hack/observability/go.sum
	cd hack/observability && go build -trimpath -tags remove_all_sd -o $@.tmp github.com/prometheus/prometheus/cmd/promtool && mv $@.tmp $@

.PHONY: test-observability
test-observability: $(PROMTOOL) ## Check config/prometheus/rules.yaml and run its unit tests (hack/observability/rules_test.yaml) with promtool built from the module proxy; check that config/grafana is generated and parse every dashboard and rule query with the PromQL parser (hack/observability).
	$(PROMTOOL) check rules config/prometheus/rules.yaml
	$(PROMTOOL) test rules hack/observability/rules_test.yaml
	cd hack/observability && go test -count=1 -timeout $(OBSERVABILITY_TIMEOUT) ./...

.PHONY: dashboard-picture
dashboard-picture: controlplane ## Run TestDashboardAndAlertQueriesOnRealMetrics (a real Prometheus on a local cluster with retries) and draw its key panels into docs/dashboard.svg (not in `make test`).
	NPP_DASHBOARD_RESULTS=$(BIN)/dashboard-results.json KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go test -count=1 -timeout 15m -run 'TestDashboardAndAlertQueriesOnRealMetrics' ./e2e/admission/
	cd hack/observability && go run . -render $(BIN)/dashboard-results.json -svg ../../docs/dashboard.svg

.PHONY: test-fuzz
test-fuzz: ## Run every fuzz target for FUZZTIME each (default 10s), seed corpus in testdata/fuzz.
	hack/fuzz.sh

.PHONY: test-e2e
test-e2e: controlplane ## Run the e2e suite against a real control plane (builds the binaries first if needed).
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go test -count=1 -p 1 -timeout $(E2E_TIMEOUT) $(E2E_PKGS)

# The oldest supported Kubernetes minor (docs/deploy.md), built from the module proxy like the
# current one, from hack/controlplane/compat.mod.
COMPAT_KUBE_VERSION := $(shell cd hack/controlplane && go list -modfile=compat.mod -m -f '{{.Version}}' k8s.io/kubernetes | sed 's/^v//')
COMPAT_CONTROLPLANE_DIR := $(BIN)/k8s/$(COMPAT_KUBE_VERSION)-$(shell go env GOOS)-$(shell go env GOARCH)

.PHONY: test-compat
test-compat: ## Run the e2e suite against the oldest supported Kubernetes minor (hack/controlplane/compat.mod, not in `make test`; the first build takes 20-30 minutes); docs/deploy.md.
	KUBE_MODFILE=compat.mod hack/build-controlplane.sh kube-apiserver etcd kube-scheduler kube-controller-manager kwok kubemark
	KUBEBUILDER_ASSETS=$(COMPAT_CONTROLPLANE_DIR) go test -count=1 -p 1 -timeout 45m $(E2E_PKGS)

.PHONY: test-faults
test-faults: controlplane ## Run the long faults of the fault campaign (not in `make test`, ~10 minutes): an API brownout, the API server restarted with 200 pods retrying, the leader killed with Recreates pending, both replicas down for 60s, the first admission after a restart (e2e/faults, build tag faults); docs/reliability.md.
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go test -tags faults -count=1 -p 1 -timeout 30m -v ./e2e/faults/

.PHONY: bench-admission
bench-admission: controlplane build ## Admission load test on a local cluster: pod CREATE latency through the webhook (two replicas, 1000 policies) vs a no-op webhook vs none, sequential and 4 in flight (docs/benchmarks.md).
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go run ./e2e/cmd/admissionload

# Not part of `make test`: it runs for RETRY_SCALE_DURATION (34m) plus set-up.
RETRY_SCALE_DURATION ?= 34m
RETRY_SCALE_ARGS ?=

.PHONY: bench-retry-scale
bench-retry-scale: controlplane ## Retry load on a local cluster (not in `make test`): 4,990 + 10 NodePort pods retrying for RETRY_SCALE_DURATION (34m: 30 minutes and the events library's 30-minute refresh); manager CPU/RSS, stamp lateness, first-retry delay, Events per pod (docs/benchmarks.md). RETRY_SCALE_ARGS adds flags.
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go run ./e2e/cmd/retryscale -duration $(RETRY_SCALE_DURATION) $(RETRY_SCALE_ARGS)

# Not part of `make test`: building a 50,000-pod cluster takes a quarter of an hour here.
MEMCURVE_ARGS ?=

.PHONY: bench-memory
bench-memory: controlplane ## Manager memory against cluster size (not in `make test`): RSS of both replicas (every provider enabled, the cloud kinds' CRDs installed) and of a cache-everything baseline at 5,000, 20,000 and 50,000 kwok pods, 10 % game servers (docs/benchmarks.md). MEMCURVE_ARGS adds flags.
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go run ./e2e/cmd/memcurve $(MEMCURVE_ARGS)

.PHONY: bench-failover
bench-failover: controlplane ## Leader failover at scale (not in `make test`): 4,500 game servers Ready and 500 retrying, the leader SIGKILLed 4 minutes in; time until retries resume, late and early retries, the write rate (docs/benchmarks.md).
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go run ./e2e/cmd/retryscale -ready-pods 4500 -pods-big 490 -pods-small 10 -kill-leader-after 4m -failover-window 3m -duration 8m

.PHONY: bench-cold-start
bench-cold-start: controlplane ## A replica restarted on a 50,000-pod cluster (not in `make test`): time to /readyz against one list of every pod (docs/benchmarks.md).
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go run ./e2e/cmd/memcurve -steps 50000 -restart

FLEET_ARGS ?=

.PHONY: bench-fleet
bench-fleet: controlplane ## Time to playable (not in `make test`): a StatefulSet scaled from 0 to 1,000 game servers at once, without network (baseline), NodePort, HostPort and AlibabaCloud-SLB through the cloud in a box (1 and 10 service-controller workers, 200 ms per cloud call); CREATE to Running, to the Service's ingress and to network Ready, p50/p99/max (docs/benchmarks.md). FLEET_ARGS adds flags (further phases: floor, eip, floor-eip, sharedport, floor-sharedport; -audit).
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) go run ./e2e/cmd/fleetload $(FLEET_ARGS)

##@ Build

.PHONY: controlplane
controlplane: ## Build (or reuse from bin/k8s/) etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok, kubemark (the hollow-node kubelet), kubelet and containerd from the Go module proxy, and install the real node's Debian packages (runc, CNI plugins, iptables) when root.
	hack/build-controlplane.sh kube-apiserver etcd kube-scheduler kube-controller-manager kwok kubemark kubelet kube-proxy containerd containerd-shim-runc-v2 ctr
	hack/install-node-deps.sh

.PHONY: build
build: ## Build the manager and nppctl into bin/ (bin/kubectl-npp links to nppctl: the kubectl plugin `kubectl npp`; bin/kubectl_complete-npp completes it).
	go build -buildvcs=true -o $(BIN)/manager ./cmd/manager
	go build -buildvcs=true -o $(BIN)/nppctl ./cmd/nppctl
	ln -sf nppctl $(BIN)/kubectl-npp
	install -m 0755 cmd/nppctl/kubectl_complete-npp $(BIN)/kubectl_complete-npp

.PHONY: image
image: ## Build the OCI images of the manager and nppctl (linux/amd64 and linux/arm64, reproducible from the commit) and the kubectl-npp release binaries into bin/image/ (hack/image; docs/deploy.md).
	cd hack/image && go run . -root ../.. -out $(BIN)/image

# VERSION is the release make release builds (vMAJOR.MINOR.PATCH[-PRE]); RELEASE_REGISTRY the
# registry and path its images are named for. The chart's default image.repository
# (values.yaml) is <RELEASE_REGISTRY>/network-plugin-policy: change both together.
VERSION ?=
RELEASE_REGISTRY ?= ghcr.io/okg-extensions
RELEASE_DIR := $(BIN)/release

.PHONY: release
release: ## Build release VERSION into bin/release/ from the commit, reproducibly: images named $(RELEASE_REGISTRY)/...:VERSION (OCI layouts, archives, SBOMs), the chart packaged, kubectl-npp for linux, darwin and windows with SBOMs and krew archives, the krew manifest, release notes and SHA256SUMS (docs/release.md); every image and binary is built a second time with an empty Go build cache, and any difference fails the release. Pushes nothing.
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release: VERSION=vX.Y.Z is required (got '$(VERSION)')"; exit 1; }
	@[[ -z "$$(git status --porcelain --untracked-files=all)" ]] || { echo "make release: the tree has uncommitted or untracked files; a release is built from a commit"; exit 1; }
	@grep -q '^  repository: $(RELEASE_REGISTRY)/network-plugin-policy$$' charts/network-plugin-policy/values.yaml || { echo "make release: the chart's default image.repository is not $(RELEASE_REGISTRY)/network-plugin-policy"; exit 1; }
	rm -rf $(RELEASE_DIR)
	cd hack/chart && go run . -root ../.. -package $(RELEASE_DIR) -version $(VERSION)
	cd hack/image && go run . -root ../.. -out $(RELEASE_DIR)/images -release-dir $(RELEASE_DIR) -registry $(RELEASE_REGISTRY) -version $(VERSION) -twice

# REAL_NODES real nodes (kubelet, containerd, runc, CNI) beside the fake ones, running echo game
# servers whose reachability the live table shows; needs Linux and root (make run REAL_NODES=2).
REAL_NODES ?= 0

.PHONY: run
run: controlplane build ## Start a local cluster with fake nodes (and REAL_NODES real ones), run the manager against it, apply config/samples/ and show the pods' networks live (Ctrl-C stops all).
	go build -o $(BIN)/localcluster ./e2e/cmd/localcluster
	KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR) $(BIN)/localcluster --manager $(BIN)/manager --real-nodes $(REAL_NODES)
