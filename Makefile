# cdplace — build and test entry points. `make test` is what CI runs (.ci/run).
# Everything Rust is built in the release profile once and shared by tests, the C ABI smoke
# test, the benchmark and the Go adapter (wasmtime compiling the component in a debug build is
# ~20x slower, which would dominate the test time).
CARGO ?= cargo
GO ?= go
CC ?= cc
GUEST_DIR := target/wasm32-wasip2/guest
GUEST := $(GUEST_DIR)/cdplace_guest.wasm
FAULTY := $(GUEST_DIR)/cdplace_faulty_guest.wasm
HOSTLIB := target/release/libcdplace_host.a
SCHEDULER := target/go/kube-scheduler
EMBEDDED_GUEST := host-shim/go/internal/cdplace/guest/cdplace_guest.wasm
LINK_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
# Every Go build or test that links $(HOSTLIB) stamps it with the archive's hash (cdplace.HostLibrary):
# Go's caches do not look at the archive's content, so a Rust-only change would otherwise leave
# `go build -o` calling the old binary up to date and `go test` replaying old results. Expanded
# when a recipe runs, after the archive is built.
GO_HOSTLIB = -ldflags=-X=github.com/cdplace/cdplace/host-shim/go/internal/cdplace.HostLibrary=$(shell sha256sum $(CURDIR)/$(HOSTLIB) | cut -c1-16)

E2E_BIN := target/e2e/bin
E2E_BINARIES := $(E2E_BIN)/etcd $(E2E_BIN)/kube-apiserver $(E2E_BIN)/kube-controller-manager $(E2E_BIN)/cdplace-demo \
	$(E2E_BIN)/kube-scheduler-stock $(E2E_BIN)/kubectl

.PHONY: all toolchain guest build scheduler test test-rust test-c test-go test-e2e lint lint-go lint-e2e e2e-binaries bench bench-smoke bench-framework bench-throughput bench-placement bench-e2e-smoke demo explain-demo clean

all: build scheduler

## toolchain: the wasm target and lint components rust-toolchain.toml names. rustup installs a
## pinned toolchain's targets only when it installs the toolchain itself, so a machine that already
## had 1.95 lacks wasm32-wasip2; this adds what is missing (a no-op when present).
toolchain:
	@command -v rustup >/dev/null || { echo "rustup is required (https://rustup.rs)"; exit 1; }
	@tc=$$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml); \
	rustup run "$$tc" rustc --version >/dev/null 2>&1 || rustup toolchain install "$$tc" --profile minimal; \
	rustup target list --toolchain "$$tc" --installed 2>/dev/null | grep -qx wasm32-wasip2 || \
		rustup target add --toolchain "$$tc" wasm32-wasip2; \
	rustup component list --toolchain "$$tc" --installed 2>/dev/null | grep -q '^clippy' || \
		rustup component add --toolchain "$$tc" rustfmt clippy

## guest: the policy component (and the test-only faulty component), wasm32-wasip2
guest: toolchain
	$(CARGO) build -p cdplace-guest -p cdplace-faulty-guest --target wasm32-wasip2 --profile guest
	$(CARGO) build $(TEST_GUEST_PACKAGES) --target wasm32-wasip2 --profile guest
	$(CARGO) build -p cdplace-guest-worstfit --target wasm32-wasip2 --profile guest

## build: the guest, then libcdplace_host.a and the `cdplace` CLI (also as `kubectl-cdplace`, the
## kubectl plugin), which embeds the guest (host-shim/cli/build.rs), so the guest is built first
build: guest
	$(CARGO) build --release -p cdplace-host -p cdplace-cli

## scheduler: kube-scheduler v1.37 with ComputeDomainPlacement (the guest embedded)
scheduler: build
	cp $(GUEST) $(EMBEDDED_GUEST)
	mkdir -p target/go
	cd host-shim/go && $(GO) build "$(GO_HOSTLIB) $(GO_VERSION_X)" -o ../../$(SCHEDULER) ./cmd/kube-scheduler

## test: everything CI checks
test: lint test-rust test-c test-go fuzz-smoke test-e2e bench-smoke bench-e2e-smoke bench-upstream-smoke test-image-tool test-node-smoke

test-rust: build examples example-python
	$(CARGO) test --workspace --release

## test-policy-new: `cdplace policy new` makes a policy crate in a temporary directory outside the
## repository, which builds offline with the guest profile and passes `cdplace policy check`
## (host-shim/cli/tests/policy_new.rs; a cold build of the SDK's dependencies for wasm32-wasip2,
## minutes, so not part of test-rust)
.PHONY: test-policy-new
test-policy-new: build
	$(CARGO) test --release -p cdplace-cli --test policy_new -- --ignored

## test-c: the C ABI driven from C through include/cdplace.h
test-c: build
	$(CC) -Wall -Wextra -Werror -O1 -o target/release/cabi-smoke host-shim/lib/tests/c/smoke.c \
		-Ihost-shim/lib/include $(HOSTLIB) $(LINK_LIBS)
	target/release/cabi-smoke $(GUEST) $(FAULTY)

## fuzz-smoke / fuzz: Go's coverage-guided fuzzing of fact extraction (FuzzExtract, arbitrary
## objects as the informers decode them) and of the host-guest boundary through the real library
## and guest (FuzzApplyFacts: arbitrary batches; FuzzFactSequences: well-formed facts with
## colliding names and counts at the integer limits, decided after every batch). fuzz-smoke runs
## each target for a fixed number of executions (the third field, about 10 s each here; in
## `make test`); fuzz runs each for FUZZTIME, one worker each, and records the executions in
## target/fuzz/ (results in docs/dev/reliability.md).
## fuzz-smoke counts executions rather than time: Go 1.26's fuzz coordinator can fail a run whose
## -fuzztime deadline expires while a starved worker is mid-call ("context deadline exceeded", no
## failing input; golang/go#75804, fixed in Go 1.27), which is what a loaded 2-core CI machine does.
## The long run keeps its time budget and fails on anything but that exact ending: a real finding
## always writes "Failing input written to testdata/fuzz/...".
FUZZ_TARGETS := internal/facts:FuzzExtract:50000 internal/cdplace:FuzzApplyFacts:20000 \
	internal/cdplace:FuzzFactSequences:5000
FUZZTIME ?= 1h
.PHONY: fuzz fuzz-smoke
fuzz-smoke: build
	cp $(GUEST) $(EMBEDDED_GUEST)
	cd host-shim/go && for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$${rest#*:}; \
		$(GO) test $(GO_HOSTLIB) ./$$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $${n}x -parallel 1 || exit 1; done

fuzz: build
	cp $(GUEST) $(EMBEDDED_GUEST)
	mkdir -p target/fuzz
	cd host-shim/go && for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$${rest#*:}; \
		log=../../target/fuzz/$$name.log; \
		$(GO) test $(GO_HOSTLIB) ./$$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -parallel 1 > $$log 2>&1; \
		rc=$$?; tail -n 3 $$log; \
		if [ $$rc -ne 0 ] && grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
			echo "$$name: the coordinator's deadline race (golang/go#75804), no failing input: counted as a pass"; rc=0; fi; \
		[ $$rc -eq 0 ] || exit $$rc; done

## test-go: the plugin through the real scheduling framework, the shipped configs, the binary;
## the adapter again under the race detector
test-go: scheduler lint-go
	cd host-shim/go && CDPLACE_SCHEDULER_BIN=$(CURDIR)/$(SCHEDULER) $(GO) test $(GO_HOSTLIB) ./...
	cd host-shim/go && $(GO) test $(GO_HOSTLIB) -race -count=1 ./internal/... ./pkg/...

## Test-only policy components (issue 35; built by `guest` into $(GUEST_DIR), never shipped):
## cdplace_test_violator.wasm (allows every node to every pod), cdplace_test_preempt_violator.wasm
## (the shipped rules with gang preemption victims the host must refuse), cdplace_test_instantiate_trap.wasm
## (traps in configure), cdplace_test_loop.wasm (loops in every pre-filter),
## cdplace_test_other_wit.wasm (built against cdplace:policy@0.4.0: the host refuses to load it),
## cdplace_test_overlay_panic.wasm (the shipped policy, panicking on any overlay: preemption's
## what-ifs), cdplace_test_unsafe_when_placeable.wasm (the shipped policy, allowing every node
## wherever it would place a pod),
## and cdplace_guest_worstfit.wasm (the shipped policy with worst fit across cliques). The
## worst-fit one is built in a cargo invocation of its own: features unify within one, and the
## shipped component must not get cdplace-policy's worst-fit feature.
TEST_GUEST_PACKAGES := -p cdplace-test-violator -p cdplace-test-preempt-violator -p cdplace-test-instantiate-trap -p cdplace-test-loop -p cdplace-test-other-wit \
	-p cdplace-test-overlay-panic -p cdplace-test-unsafe-when-placeable

## bench-swap: what a policy swap costs at 5,004 trays (278 cliques of 18, 200 pending domains,
## 500 placed pods): compiling the component, then Cluster::swap's checks and self-test on the
## live view (host-shim/lib/tests/swap.rs swap_at_5004_trays; prints the figures)
.PHONY: bench-swap
bench-swap: build
	$(CARGO) test --release -p cdplace-host --test swap -- --ignored --nocapture swap_at_5004_trays

## bench-shadow: what a shadow policy costs at 5,004 trays: the live PreFilter without and with a
## worst-fit shadow, and the shadow's step per decision (host-shim/lib/tests/shadow.rs)
.PHONY: bench-shadow
bench-shadow: build
	$(CARGO) test --release -p cdplace-host --test shadow -- --ignored --nocapture shadow_at_5004_trays

## examples: the example policies of guest/examples as components beside the guest:
## team-racks (Rust on cdplace-policy-sdk; its tests in test-rust run it natively and as this
## component). example-python: first-fit-py, the contract from Python through componentize-py
## (pinned, installed into target/py on first use; WASI imports replaced by trapping stubs, so
## the component imports nothing like every policy; about a minute)
TEAM_RACKS := $(GUEST_DIR)/cdplace_example_team_racks.wasm
FIRST_FIT_PY := $(GUEST_DIR)/first_fit_py.wasm
COMPONENTIZE_PY_VERSION := 0.25.1
PY_VENV := target/py
.PHONY: examples example-python policy-check
examples: toolchain
	$(CARGO) build -p cdplace-example-team-racks --target wasm32-wasip2 --profile guest

example-python: $(FIRST_FIT_PY)

$(FIRST_FIT_PY): guest/examples/first-fit-py/app.py wit/cdplace.wit
	@$(PY_VENV)/bin/componentize-py --version 2>/dev/null | grep -qx 'componentize-py $(COMPONENTIZE_PY_VERSION)' || \
		{ python3 -m venv $(PY_VENV) && $(PY_VENV)/bin/pip install -q 'componentize-py==$(COMPONENTIZE_PY_VERSION)'; }
	mkdir -p $(GUEST_DIR)
	$(PY_VENV)/bin/componentize-py -d wit -w policy componentize --stub-wasi -p guest/examples/first-fit-py app -o $@

## policy-check: `cdplace policy check` (the conformance suite) on the shipped guest and on every
## example policy; each must pass, and each reports its pre-filter call time (p50/p99)
TEAM_RACKS_CHECK_ARGS := {"policyArgs":{"teams":{"batch":["0f8e7d6c-5b4a-4321-9876-abcdef012345.3"]}}}
policy-check: build examples example-python
	target/release/cdplace policy check $(GUEST)
	target/release/cdplace policy check --args '$(TEAM_RACKS_CHECK_ARGS)' $(TEAM_RACKS)
	target/release/cdplace policy check $(FIRST_FIT_PY)

lint: guest
	$(CARGO) fmt --all -- --check
	@# The staticlib kube-scheduler links must not pull in the CLI's client, runtime or parsers.
	@! $(CARGO) tree -p cdplace-host -e normal --prefix none | grep -E '^(kube|kube-[a-z]+|clap|serde_yaml[a-z_]*|tokio|hyper|rustls) v' || \
		{ echo "cdplace-host must not depend on the CLI's kube, clap, serde_yaml, tokio, hyper or rustls"; exit 1; }
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
	$(CARGO) clippy -p cdplace-guest -p cdplace-faulty-guest -p cdplace-example-team-racks --target wasm32-wasip2 --profile guest -- -D warnings
	$(CARGO) clippy $(TEST_GUEST_PACKAGES) -p cdplace-guest-worstfit --target wasm32-wasip2 --profile guest -- -D warnings

## version: cdplace's version has one owner, `version` in Cargo.toml's [workspace.package]
## (0.37.x: one minor per Kubernetes minor). `make scheduler` stamps k8s.io/component-base/version
## as upstream's hack/lib/version.sh does: gitVersion v<k8s.io/kubernetes in host-shim/go/go.mod>
## -cdplace.<ours> (v1.37.2-cdplace.0.37.0), gitMajor/gitMinor from Kubernetes', gitCommit and
## gitTreeState from git, buildDate the last commit's time (the same tree builds the same binary;
## GIT_COMMIT, GIT_TREE_STATE and BUILD_DATE override them where there is no .git). Expanded when
## a recipe runs. e2e/parity_test.go checks every copy of the version.
CDPLACE_VERSION = $(shell sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
KUBE_VERSION = $(shell cd host-shim/go && $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
GIT_TREE_STATE ?= $(shell if [ -z "$$(git status --porcelain 2>/dev/null)" ]; then echo clean; else echo dirty; fi)
BUILD_DATE ?= $(shell TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
GO_KUBE_VERSION_X = -X=k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(KUBE_VERSION:v%=%))) \
	-X=k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION:v%=%)))
GO_VERSION_X = $(GO_KUBE_VERSION_X) -X=k8s.io/component-base/version.gitVersion=$(KUBE_VERSION)-cdplace.$(CDPLACE_VERSION) \
	-X=k8s.io/component-base/version.gitCommit=$(GIT_COMMIT) -X=k8s.io/component-base/version.gitTreeState=$(GIT_TREE_STATE) \
	-X=k8s.io/component-base/version.buildDate=$(BUILD_DATE)

## version / go-version-ldflags: print the version kube-scheduler is stamped with, and the -ldflags
## value that stamps it (the image's binaries get the same version from IMAGE_VERSION_X)
.PHONY: version go-version-ldflags
version:
	@echo $(KUBE_VERSION)-cdplace.$(CDPLACE_VERSION)
go-version-ldflags:
	@echo $(GO_VERSION_X)

## kube-scheduler-stock: upstream's kube-scheduler built from the module the cdplace one links
## (host-shim/go/go.mod), with upstream's version stamp, for e2e/parity_test.go: the cdplace binary
## must have every flag and metric family it has
$(E2E_BIN)/kube-scheduler-stock: host-shim/go/go.mod host-shim/go/go.sum
	mkdir -p $(E2E_BIN)
	cd host-shim/go && $(GO) build "-ldflags=$(GO_KUBE_VERSION_X) -X=k8s.io/component-base/version.gitVersion=$(KUBE_VERSION)" \
		-o ../../$@ k8s.io/kubernetes/cmd/kube-scheduler

## e2e-binaries: etcd, kube-apiserver and kube-controller-manager from the pinned Go modules
## (e2e/go.mod), and the demo; rebuilt only when e2e/go.mod or go.sum change
e2e-binaries: $(E2E_BINARIES)

$(E2E_BIN)/etcd: e2e/go.mod e2e/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e && $(GO) build -o ../$@ go.etcd.io/etcd/server/v3

# The API server reports the pinned release as its version (/version), as a released binary does
# (Kubernetes' build stamps it the same way): `helm install` checks a chart's kubeVersion against it.
$(E2E_BIN)/kube-apiserver: e2e/go.mod e2e/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e && v=$$($(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) && \
	$(GO) build -o ../$@ -ldflags "-X k8s.io/component-base/version.gitVersion=$$v \
		-X k8s.io/component-base/version.gitMajor=$$(echo $$v | cut -d. -f1 | tr -d v) \
		-X k8s.io/component-base/version.gitMinor=$$(echo $$v | cut -d. -f2)" k8s.io/kubernetes/cmd/kube-apiserver

$(E2E_BIN)/kube-controller-manager: e2e/go.mod e2e/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e && $(GO) build -o ../$@ k8s.io/kubernetes/cmd/kube-controller-manager

# kubectl of the control plane's release, for the docs' commands run verbatim
# (e2e/policy_apply_test.go); a tools module of its own, since e2e/go.mod does not carry kubectl's
# dependencies.
$(E2E_BIN)/kubectl: e2e/tools/kubectl/go.mod e2e/tools/kubectl/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e/tools/kubectl && v=$$($(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) && \
	$(GO) build -trimpath -o ../../../$@ -ldflags "-X k8s.io/component-base/version.gitVersion=$$v \
		-X k8s.io/client-go/pkg/version.gitVersion=$$v" k8s.io/kubernetes/cmd/kubectl

$(E2E_BIN)/cdplace-demo: e2e/go.mod e2e/go.sum $(wildcard e2e/harness/*.go e2e/cmd/cdplace-demo/*.go)
	mkdir -p $(E2E_BIN)
	cd e2e && $(GO) build -o ../$@ ./cmd/cdplace-demo

# FAILED_OUTPUT prints, from `go test -v` output, the last 40 lines each failing top-level test
# printed before its "--- FAIL" (its t.Log and t.Error lines), so a red run's report names the
# assertion that failed, not only the test.
FAILED_OUTPUT = awk '/^=== (RUN|CONT)/{n=0} {b[n%40]=$$0; n++} /^--- FAIL/{print "=== what the failing test printed:"; for(i=(n>40?n-40:0);i<n;i++) print b[i%40]}'

## test-e2e: the scenarios on a real control plane (etcd, kube-apiserver, kube-controller-manager,
## the cdplace kube-scheduler and a stock one for the baseline, as local processes), the Helm
## chart (e2e/helm_test.go needs the helm binary; promtool checks its alerts, helm-docs its README)
## and the playground
test-e2e: scheduler e2e-binaries helm promtool helm-docs lint-e2e
	mkdir -p target/e2e
	cd e2e && { $(GO) test -count=1 -timeout 30m -v ./... > ../target/e2e/test.log 2>&1; rc=$$?; \
		grep -E '^ *(--- |ok |FAIL|control plane)|^ *[|]' ../target/e2e/test.log; \
		if [ $$rc -ne 0 ]; then $(FAILED_OUTPUT) ../target/e2e/test.log; tail -n 60 ../target/e2e/test.log; fi; exit $$rc; }

## drills: the fault drills (e2e/drills_test.go; issue 13): a scheduler SIGKILL, kube-apiserver
## restarts, tray failures, an etcd restart, a leader failover, a pod storm, a watch that gets 410
## Gone while a gang binds, and the faulty guest in the real scheduler, each on a control plane of
## its own, with their pass criteria; minutes each, so not part of test-e2e. Figures in
## target/e2e/drills.log (lines starting DRILL), recorded in docs/dev/reliability.md
.PHONY: drills
drills: scheduler e2e-binaries lint-e2e
	mkdir -p target/e2e
	cd e2e && { CDPLACE_DRILLS=1 $(GO) test -count=1 -timeout 60m -v -run '^TestDrill' . > ../target/e2e/drills.log 2>&1; rc=$$?; \
		grep -E '^ *(--- |ok |FAIL|control plane)|DRILL ' ../target/e2e/drills.log; \
		if [ $$rc -ne 0 ]; then $(FAILED_OUTPUT) ../target/e2e/drills.log; tail -n 60 ../target/e2e/drills.log; fi; exit $$rc; }

## helm: Helm v3 built from the version pinned in e2e/tools/helm/go.mod (a module of its own, since
## e2e/go.mod forces k8s.io/* to the control plane's v0.37.2), with its version and default
## Kubernetes version stamped as helm's own Makefile does; rebuilt when that go.mod or go.sum change
HELM := $(E2E_BIN)/helm
.PHONY: helm test-helm
helm: $(HELM)

$(HELM): e2e/tools/helm/go.mod e2e/tools/helm/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e/tools/helm && v=$$($(GO) list -m -f '{{.Version}}' helm.sh/helm/v3) && \
	k=$$($(GO) list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2) && \
	$(GO) build -trimpath -o ../../../$@ -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$$v \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$k \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$k" \
		helm.sh/helm/v3/cmd/helm

## deploy-rbac: kube-scheduler-config/deploy/rbac.yaml rendered from the chart (the one owner of
## the scheduler's permissions) with deploy/rbac-values.yaml, Helm's own labels left out
DEPLOY_RBAC_LABELS := helm.sh/chart|app.kubernetes.io/(managed-by|version|instance|name)
.PHONY: deploy-rbac
deploy-rbac: helm
	{ echo '# Generated by `make deploy-rbac` from the Helm chart with deploy/rbac-values.yaml: do not edit,'; \
	  echo '# change kube-scheduler-config/chart/cdplace-scheduler/templates/{clusterrole,role}.yaml.'; \
	  $(HELM) template cdplace-scheduler kube-scheduler-config/chart/cdplace-scheduler --namespace cdplace-system \
		-f kube-scheduler-config/deploy/rbac-values.yaml \
		--show-only templates/clusterrole.yaml --show-only templates/role.yaml \
		| grep -v -E '^ +($(DEPLOY_RBAC_LABELS)): '; } > kube-scheduler-config/deploy/rbac.yaml

## test-helm: the chart kube-scheduler-config/chart/cdplace-scheduler: helm lint and template in both
## modes, the rendered objects applied server-side to the e2e API server, a scheduler started from
## the rendered config under the chart's ServiceAccount places a ComputeDomain, and the same with
## one ClusterRole rule removed does not (e2e/helm_test.go); the alerts through promtool, the README
## against helm-docs, and the runbooks (install, test, upgrade, rollback, uninstall) with the helm
## binary in both modes (e2e/helm_ops_test.go, e2e/helm_lifecycle_test.go)
test-helm: scheduler e2e-binaries helm promtool helm-docs lint-e2e
	mkdir -p target/e2e
	cd e2e && { CDPLACE_HELM_BIN=$(CURDIR)/$(HELM) CDPLACE_PROMTOOL_BIN=$(CURDIR)/$(PROMTOOL) CDPLACE_HELM_DOCS_BIN=$(CURDIR)/$(HELM_DOCS) $(GO) test -count=1 -timeout 15m -v -run '^TestHelm' . \
		> ../target/e2e/test-helm.log 2>&1; rc=$$?; \
		grep -E '^ *(--- |ok |FAIL|control plane)' ../target/e2e/test-helm.log; \
		if [ $$rc -ne 0 ]; then $(FAILED_OUTPUT) ../target/e2e/test-helm.log; tail -n 60 ../target/e2e/test-helm.log; fi; exit $$rc; }

## promtool / helm-docs: Prometheus' promtool (checks and unit-tests the chart's alert rules) and
## helm-docs (generates the chart's README.md from values.yaml), each built from the version pinned
## in a tools module of its own (e2e/tools/promtool, e2e/tools/helm-docs), as helm is; rebuilt when
## that go.mod or go.sum change. chart-docs: regenerate the chart's README.md (make test-helm checks
## it is current).
PROMTOOL := $(E2E_BIN)/promtool
HELM_DOCS := $(E2E_BIN)/helm-docs
.PHONY: promtool helm-docs chart-docs
promtool: $(PROMTOOL)
helm-docs: $(HELM_DOCS)

$(PROMTOOL): e2e/tools/promtool/go.mod e2e/tools/promtool/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e/tools/promtool && $(GO) build -trimpath -o ../../../$@ github.com/prometheus/prometheus/cmd/promtool

$(HELM_DOCS): e2e/tools/helm-docs/go.mod e2e/tools/helm-docs/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e/tools/helm-docs && $(GO) build -trimpath -o ../../../$@ github.com/norwoodj/helm-docs/cmd/helm-docs

chart-docs: $(HELM_DOCS)
	$(HELM_DOCS) --chart-search-root kube-scheduler-config/chart/cdplace-scheduler

## test-node-smoke: ComputeDomain pods on real kubelets, one level below kind (issue 44): the e2e
## control plane, and per simulated tray a containerd, a kubelet (v1.37.2, built from
## e2e/tools/kubelet) and the fake NVIDIA driver's DRA kubelet plugins
## (e2e/cmd/cdplace-fake-nvidia-driver, rules in e2e/nvnode), all processes on this machine
## (harness.StartRealNode; root). Two runs of e2e/cmd/cdplace-node-smoke, each with a stale
## ComputeDomain label on tray-0-0: cdplace places a 2-pod domain on 2 cliques of 2 trays, every pod
## Running, both channel claims Prepared by real kubelets, 0 refusals; the stock scheduler with the
## upstream clique pod-affinity pattern places the same domain on 1 clique of 2 trays and a real
## kubelet refuses the stale tray's Prepare with the driver's text. node-deps installs containerd,
## runc, the CNI plugins, iproute2 and iptables (the bridge plugin's masquerade) from Debian when
## missing; where the capability bounding set
## lacks CAP_SYS_RESOURCE, containerd runs e2e/kind/runc-drop-sys-resource.
KUBELET := $(E2E_BIN)/kubelet
NODE_SMOKE_ARGS = -repo . -kubelet $(KUBELET) -fake-driver $(E2E_BIN)/cdplace-fake-nvidia-driver \
	-pause $(E2E_BIN)/cdplace-pause -cdplace-bin $(SCHEDULER) \
	$$(if [ $$(( 0x$$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status) >> 24 & 1 )) = 0 ]; then \
		echo -runtime $(CURDIR)/e2e/kind/runc-drop-sys-resource; fi)
.PHONY: test-node-smoke node-deps node-smoke-binaries
node-deps:
	@missing=; for c in containerd ctr runc ip iptables; do command -v $$c >/dev/null || missing=1; done; \
	[ -x /usr/lib/cni/bridge ] || missing=1; \
	if [ -n "$$missing" ]; then \
		echo "node-deps: installing containerd, runc, containernetworking-plugins, iproute2, iptables"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc containernetworking-plugins iproute2 iptables >/dev/null; \
	fi

$(KUBELET): e2e/tools/kubelet/go.mod e2e/tools/kubelet/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e/tools/kubelet && v=$$($(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) && \
	$(GO) build -trimpath -o ../../../$@ -ldflags "-X k8s.io/component-base/version.gitVersion=$$v \
		-X k8s.io/component-base/version.gitMajor=$$(echo $$v | cut -d. -f1 | tr -d v) \
		-X k8s.io/component-base/version.gitMinor=$$(echo $$v | cut -d. -f2)" k8s.io/kubernetes/cmd/kubelet

# Go's cache makes these cheap when nothing changed.
node-smoke-binaries: $(KUBELET)
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-fake-nvidia-driver ./cmd/cdplace-fake-nvidia-driver && \
		CGO_ENABLED=0 $(GO) build -o ../$(E2E_BIN)/cdplace-pause ./cmd/cdplace-pause && \
		$(GO) build -o ../$(E2E_BIN)/cdplace-node-smoke ./cmd/cdplace-node-smoke

test-node-smoke: scheduler e2e-binaries node-deps node-smoke-binaries
	mkdir -p target/e2e
	$(E2E_BIN)/cdplace-node-smoke $(NODE_SMOKE_ARGS) -scheduler cdplace -cliques 2 -trays 2 -size 2 -expect running
	$(E2E_BIN)/cdplace-node-smoke $(NODE_SMOKE_ARGS) -scheduler stock -cliques 1 -trays 2 -size 2 -expect refused

## kind-docker: a Docker engine that runs privileged containers, as kind's nodes need
## (e2e/kind/docker-setup.sh): only checks on an ordinary Docker host; on a fresh Debian machine as
## root installs docker.io and starts dockerd; where the capability bounding set lacks
## CAP_SYS_RESOURCE (this project's CI microVMs) registers e2e/kind/runc-drop-sys-resource as
## dockerd's default runtime. kind: the kind CLI from the version e2e/tools/kind pins.
KIND := $(E2E_BIN)/kind
.PHONY: kind-docker kind
kind-docker:
	e2e/kind/docker-setup.sh

kind: $(KIND)

$(KIND): e2e/tools/kind/go.mod e2e/tools/kind/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e/tools/kind && $(GO) build -trimpath -o ../../../$@ sigs.k8s.io/kind

lint-e2e:
	@test -z "$$(cd e2e && gofmt -l .)" || { echo "gofmt would change:"; cd e2e && gofmt -l .; exit 1; }
	cd e2e && $(GO) vet ./...

lint-go: build
	cp $(GUEST) $(EMBEDDED_GUEST)
	@test -z "$$(cd host-shim/go && gofmt -l .)" || { echo "gofmt would change:"; cd host-shim/go && gofmt -l .; exit 1; }
	cd host-shim/go && $(GO) vet ./...

## bench: wasm vs native policy cost at 500 / 5,000 / 20,000 trays (results in target/bench/)
bench: guest
	$(CARGO) bench -p cdplace-testkit --bench policy

## bench-throughput: pods/s through cdplace and the stock default scheduler on a real control
## plane at 500 and 5,000 trays, with the schedulers' latency histograms (target/bench/throughput/)
bench-throughput: scheduler e2e-binaries
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-throughput ./cmd/cdplace-bench-throughput
	$(E2E_BIN)/cdplace-bench-throughput -repo .

## bench-placement: seeded traces (seeds 1 and 2) of ComputeDomain arrivals, departures and tray
## failures through the baseline, cdplace and cdplace with cliqueReservationAfterSeconds: 3 (the
## shipped 60 s compressed like the trace), per size class (target/bench/placement/; about 25 minutes)
bench-placement: scheduler e2e-binaries
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-placement ./cmd/cdplace-bench-placement
	$(E2E_BIN)/cdplace-bench-placement -repo .

## bench-placement-loads: issue 36's live comparison: at offered loads 0.7, 0.9 and 1.7, seeds 1, 2
## and one drawn at random (printed), the stock baseline and cdplace (cliqueReservationAfterSeconds
## 3, the shipped 60 s compressed with the trace) beside the offline EASY, conservative and FIFO
## references; pods carry activeDeadlineSeconds (1.5x their lifetime), the driver's label lag is
## 3 trace seconds; every run goes until all domains have completed or the cap (the baseline
## deadlocks: 4500 trace s). About 80 minutes (target/bench/placement-loads/load-L/)
.PHONY: bench-placement-loads
bench-placement-loads: scheduler e2e-binaries
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-placement ./cmd/cdplace-bench-placement
	for L in 0.7 0.9 1.7; do \
		$(E2E_BIN)/cdplace-bench-placement -repo . -configs cdplace-reserveafter3,baseline -seeds 1,2,random \
			-load $$L -deadline-factor 1.5 -label-lag-trace 3 -baseline-cap 4500 \
			-out target/bench/placement-loads/load-$$L || exit 1; \
	done

## bench-placement-reference: issue 36's offline references only (EASY and conservative backfill
## with exact runtimes, runtime-blind FIFO; best fit) on seeds 1 and 2 at offered loads 0.7, 0.9
## and 1.7; no control plane, under a second (target/bench/placement/reference/)
.PHONY: bench-placement-reference
bench-placement-reference:
	cd e2e && $(GO) run ./cmd/cdplace-bench-placement -repo .. -reference-only -seeds 1,2 -load 0.7,0.9,1.7

## soak: SOAK_MINUTES of bench-placement-rate churn through the shipped cdplace scheduler (seed 1,
## 8 racks; bench-placement's trace stretched to that length with its lifetimes and failure rate
## kept and 0.6 of its arrival rate: offered load about 0.9, a steady state, where bench-placement's
## 1.5 builds an ever longer queue whose pods the view must hold), sampling the scheduler's RSS and
## policy journal length
## (target/bench/soak/seed-1/scheduler-rss.svg, journal-length.svg; results in docs/dev/reliability.md)
## SOAK_ARRIVALS_PER_MIN: domain arrivals per minute of soak (22 is 0.6 of bench-placement's rate;
## 16 gives offered load about 0.65, where the scheduler's queue stays short)
SOAK_MINUTES ?= 60
SOAK_ARRIVALS_PER_MIN ?= 22
.PHONY: soak
soak: scheduler e2e-binaries
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-placement ./cmd/cdplace-bench-placement
	$(E2E_BIN)/cdplace-bench-placement -repo . -configs cdplace -seeds 1 -horizon $$(( $(SOAK_MINUTES) * 1080 )) \
		-lifetime-horizon 3600 -arrivals $$(( $(SOAK_MINUTES) * $(SOAK_ARRIVALS_PER_MIN) )) -failures $$(( $(SOAK_MINUTES) / 3 + 1 )) \
		-out target/bench/soak

## bench-e2e-smoke: both control-plane benchmarks at toy size, so they keep working (not timed)
bench-e2e-smoke: scheduler e2e-binaries
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-throughput ./cmd/cdplace-bench-throughput
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-placement ./cmd/cdplace-bench-placement
	$(E2E_BIN)/cdplace-bench-throughput -repo . -smoke -out target/bench/smoke/throughput
	$(E2E_BIN)/cdplace-bench-placement -repo . -smoke -out target/bench/smoke/placement

bench-smoke: guest
	$(CARGO) bench -p cdplace-testkit --bench policy -- --quick

## bench-framework: per-pod PreFilter+Filter+Score inside the scheduling framework, 5,000 nodes,
## with and without ComputeDomainPlacement
bench-framework: scheduler
	cd host-shim/go && $(GO) test $(GO_HOSTLIB) ./pkg/computedomain -run '^$$' -bench . -benchtime 200x -count 5

## demo: a real control plane with 4 simulated NVL72 racks, the example workloads, a rack map
demo: scheduler e2e-binaries
	$(E2E_BIN)/cdplace-demo -repo .

## playground: the e2e control plane (workload gates on), a simulated NVL72 fleet, the driver and
## kubelet emulators and the cdplace kube-scheduler, to try with kubectl: prints
## `export KUBECONFIG=...` once the fleet is ready, runs until Ctrl-C, then stops everything and
## removes its files. A component that exits meanwhile is started again after a kubelet's
## CrashLoopBackOff (10 s doubling to 5 min), each exit and restart told. Flags through PLAYGROUND_ARGS, e.g.
## make playground PLAYGROUND_ARGS="-racks 4 -cliques-per-rack 2 -trays 9 -workload-gates=false"
PLAYGROUND_ARGS ?=
.PHONY: playground
playground: scheduler e2e-binaries
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-playground ./cmd/cdplace-playground
	$(E2E_BIN)/cdplace-playground -repo . $(PLAYGROUND_ARGS)

## explain-demo: explain where example ComputeDomain pods may go on a two-rack cluster snapshot
explain-demo: build
	target/release/cdplace explain trainer-1 -n training --snapshot examples/snapshot.yaml
	target/release/cdplace explain big-0 -n training --snapshot examples/snapshot.yaml

clean:
	$(CARGO) clean

## bench-upstream: upstream's scheduler_perf (v1.37.2) with and without ComputeDomainPlacement:
## the five 500-node DRA workloads of dra/performance-config.yaml and a ComputeDomain workload
## of our own (host-shim/go/test/schedulerperf/config/), A/B/A rounds, CPU profiles of every run
## (target/bench/upstream/)
.PHONY: bench-upstream bench-upstream-smoke
bench-upstream: scheduler e2e-binaries
	mkdir -p target/bench/upstream
	cd host-shim/go && $(GO) test $(GO_HOSTLIB) -c -o ../../target/bench/upstream/schedulerperf.test ./test/schedulerperf
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-upstream ./cmd/cdplace-bench-upstream
	$(E2E_BIN)/cdplace-bench-upstream -repo .

## bench-upstream-smoke: one round of one small upstream workload and of the ComputeDomain
## workload, so the benchmark keeps working (not timed, no threshold)
bench-upstream-smoke: scheduler e2e-binaries
	mkdir -p target/bench/smoke/upstream
	cd host-shim/go && $(GO) test $(GO_HOSTLIB) -c -o ../../target/bench/smoke/upstream/schedulerperf.test ./test/schedulerperf
	cd e2e && $(GO) build -o ../$(E2E_BIN)/cdplace-bench-upstream ./cmd/cdplace-bench-upstream
	$(E2E_BIN)/cdplace-bench-upstream -repo . -smoke -bin target/bench/smoke/upstream/schedulerperf.test -out target/bench/smoke/upstream

## image: the kube-scheduler OCI image for linux/amd64 and linux/arm64, built without a container
## engine (issue 34): libcdplace_host.a per architecture (cross-compiled for arm64 with Debian's
## aarch64-linux-gnu-gcc, paths remapped, in target/image/cargo so the normal build's cache stays),
## kube-scheduler per architecture (cgo, -trimpath, no build ID or VCS stamp, tag cdplace_image
## selecting that archive), a base layer from the Debian packages e2e/tools/image/debian.lock pins,
## assembled with go-containerregistry (e2e/tools/image, cdplace-image build) into target/image/oci
## (an OCI layout with one image index), target/image/kube-scheduler-<version>.oci.tar (the layout
## as an oci-archive), kube-scheduler-<version>-linux-<arch>.docker.tar (docker load) and
## target/image/digests.json. Reproducible: every time in the image is the commit time of
## IMAGE_REVISION, the last commit that changed an input of the image (not the pin's own commit, so
## pinning does not change what it pins). Fails when the digests differ from
## kube-scheduler-config/image.lock; `make image-pin` (or IMAGE_UPDATE_PIN=1) writes the lock and the
## chart's image.digest instead (image-pin then regenerates the chart's README, whose values table
## shows image.digest's default). image-deps installs what a fresh Debian amd64 machine lacks.
IMAGE_DIR := target/image
IMAGE_TOOL := $(IMAGE_DIR)/bin/cdplace-image
IMAGE_LOCK := kube-scheduler-config/image.lock
IMAGE_VALUES := kube-scheduler-config/chart/cdplace-scheduler/values.yaml
IMAGE_DEBS_LOCK := e2e/tools/image/debian.lock
IMAGE_ARCHES := amd64 arm64
IMAGE_RUST_amd64 := x86_64-unknown-linux-gnu
IMAGE_RUST_arm64 := aarch64-unknown-linux-gnu
IMAGE_CC_amd64 := x86_64-linux-gnu-gcc
IMAGE_CC_arm64 := aarch64-linux-gnu-gcc
# The Go toolchain is an input like any other (it compiles kube-scheduler and, in cdplace-image,
# gzips the layers): `go` fetches this one from the module proxy when the local one differs.
IMAGE_GO_TOOLCHAIN := go1.26.8
IMAGE_INPUTS := Cargo.toml Cargo.lock rust-toolchain.toml .cargo wit guest host-shim Makefile e2e/tools/image
IMAGE_COMMIT = $(shell git rev-list -1 HEAD -- $(IMAGE_INPUTS))
IMAGE_REVISION = $(IMAGE_COMMIT)$(shell git status --porcelain -- $(IMAGE_INPUTS) | grep -q . && echo -dirty)
IMAGE_EPOCH = $(shell git log -1 --format=%ct $(IMAGE_COMMIT))
IMAGE_VERSION = v$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# The image's kube-scheduler is stamped as `make scheduler` stamps its own (--version prints
# v<kubernetes>-cdplace.<ours>), but from the image's inputs rather than HEAD: gitCommit the last
# commit that changed one, gitTreeState dirty when one has uncommitted changes, buildDate that
# commit's time. A commit that changes no input (the pin's own) then builds the same bytes.
IMAGE_KUBE_VERSION = $(KUBE_VERSION)-cdplace.$(CDPLACE_VERSION)
IMAGE_VERSION_X = $(GO_KUBE_VERSION_X) -X=k8s.io/component-base/version.gitVersion=$(IMAGE_KUBE_VERSION) \
	-X=k8s.io/component-base/version.gitCommit=$(IMAGE_COMMIT) \
	-X=k8s.io/component-base/version.gitTreeState=$(if $(filter %-dirty,$(IMAGE_REVISION)),dirty,clean) \
	-X=k8s.io/component-base/version.buildDate=$(shell TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ $(IMAGE_COMMIT))
IMAGE_CARGO_ENV = CARGO_TARGET_DIR=$(IMAGE_DIR)/cargo \
	RUSTFLAGS="--remap-path-prefix=$(CURDIR)=/cdplace --remap-path-prefix=$(or $(CARGO_HOME),$(HOME)/.cargo)=/cargo" \
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
IMAGE_UPDATE_PIN ?=
.PHONY: image image-build image-pin image-deps image-binaries image-check image-test image-debs-update test-image-tool crane

image-deps: toolchain
	@tc=$$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml); \
	rustup target list --toolchain "$$tc" --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu || \
		rustup target add --toolchain "$$tc" aarch64-unknown-linux-gnu
	@dpkg --print-foreign-architectures | grep -qx arm64 && command -v aarch64-linux-gnu-gcc >/dev/null && \
		command -v qemu-aarch64-static >/dev/null && command -v runc >/dev/null && \
		[ -e /usr/aarch64-linux-gnu/lib/libc.so ] || { \
		echo "image-deps: adding arm64 to dpkg, installing gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static runc"; \
		dpkg --add-architecture arm64 && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static runc; }

$(IMAGE_TOOL): $(wildcard e2e/tools/image/*.go) e2e/tools/image/go.mod e2e/tools/image/go.sum
	mkdir -p $(dir $@)
	cd e2e/tools/image && GOTOOLCHAIN=$(IMAGE_GO_TOOLCHAIN) $(GO) build -trimpath -o ../../../$@ .

image-binaries: $(foreach a,$(IMAGE_ARCHES),image-binary-$(a))

# image-binary-<arch>: libcdplace_host.a and kube-scheduler for one architecture.
image-binary-%: guest image-deps
	cp $(GUEST) $(EMBEDDED_GUEST)
	env $(IMAGE_CARGO_ENV) $(CARGO) build --release --locked -p cdplace-host --target $(IMAGE_RUST_$*)
	mkdir -p $(IMAGE_DIR)/$*
	cd host-shim/go && GOTOOLCHAIN=$(IMAGE_GO_TOOLCHAIN) CGO_ENABLED=1 GOOS=linux GOARCH=$* CC=$(IMAGE_CC_$*) \
		$(GO) build -trimpath -buildvcs=false -tags cdplace_image -ldflags "-s -w -buildid= \
		-X github.com/cdplace/cdplace/host-shim/go/internal/cdplace.HostLibrary=$$(sha256sum \
		../../$(IMAGE_DIR)/cargo/$(IMAGE_RUST_$*)/release/libcdplace_host.a | cut -c1-16) $(IMAGE_VERSION_X)" \
		-o ../../$(IMAGE_DIR)/$*/kube-scheduler ./cmd/kube-scheduler

# image-build: the image without the pin check (e2e/kind/run.sh builds a working tree's image).
image-build: image-binaries $(IMAGE_TOOL)
	e2e/tools/image/fetch-debs.sh $(IMAGE_DEBS_LOCK) $(IMAGE_DIR)/debs $(IMAGE_DIR)/base
	$(IMAGE_TOOL) build -epoch $(IMAGE_EPOCH) -version $(IMAGE_VERSION) -revision $(IMAGE_REVISION) -out $(IMAGE_DIR) \
		$(foreach a,$(IMAGE_ARCHES),-platform linux/$(a)=$(IMAGE_DIR)/base/$(a),$(IMAGE_DIR)/$(a)/kube-scheduler)

image: image-build
	$(IMAGE_TOOL) pin -digests $(IMAGE_DIR)/digests.json -lock $(IMAGE_LOCK) -values $(IMAGE_VALUES) \
		$(if $(filter 1 true yes,$(IMAGE_UPDATE_PIN)),-update)

image-pin:
	$(MAKE) image IMAGE_UPDATE_PIN=1
	$(MAKE) chart-docs

## image-debs-update: repin debian.lock to the versions apt offers now (security updates)
image-debs-update: image-deps
	e2e/tools/image/fetch-debs.sh --update $(IMAGE_DEBS_LOCK) $(IMAGE_DIR)/debs

## image-check: the layout holds the index digests.json names, both images with the config the chart
## relies on, and a push to a registry (go-containerregistry's in-memory one, as crane push does)
## keeps the digests; the arm64 binary prints its version under qemu-user with the image's own root
## filesystem as its libraries (-L); the amd64 one in its root filesystem (chroot: its own loader
## and glibc) as the image's user; both must print the stamped version (Kubernetes
## v<kubernetes>-cdplace.<ours>, as `make version` says), not component-base's unstamped default
image-check: image-build
	cd e2e/tools/image && CDPLACE_IMAGE_OUT=$(CURDIR)/$(IMAGE_DIR) $(GO) test -count=1 -v -run '^Test(BuiltImage|Pushing)' .
	$(IMAGE_TOOL) rootfs -platform linux/arm64 -out $(IMAGE_DIR)/rootfs/arm64
	v=$$(qemu-aarch64-static -L $(IMAGE_DIR)/rootfs/arm64 $(IMAGE_DIR)/rootfs/arm64/usr/local/bin/kube-scheduler --version) && \
		echo "linux/arm64: $$v" && [ "$$v" = "Kubernetes $(IMAGE_KUBE_VERSION)" ] || \
		{ echo "image-check: the arm64 kube-scheduler --version printed '$$v'; want 'Kubernetes $(IMAGE_KUBE_VERSION)'"; exit 1; }
	$(IMAGE_TOOL) rootfs -platform linux/amd64 -out $(IMAGE_DIR)/rootfs/amd64
	v=$$(chroot --userspec=65532:65532 $(IMAGE_DIR)/rootfs/amd64 /usr/local/bin/kube-scheduler --version) && \
		echo "linux/amd64: $$v" && [ "$$v" = "Kubernetes $(IMAGE_KUBE_VERSION)" ] || \
		{ echo "image-check: the amd64 kube-scheduler --version printed '$$v'; want 'Kubernetes $(IMAGE_KUBE_VERSION)'"; exit 1; }

## image-test: the amd64 image under runc (its root filesystem read-only, its user 65532, its own
## loader and libraries) as the scheduler of the e2e control plane, placing a ComputeDomain whole
## (e2e/image_test.go)
image-test: image-check scheduler e2e-binaries lint-e2e
	mkdir -p target/e2e
	cd e2e && { CDPLACE_IMAGE_ROOTFS=$(CURDIR)/$(IMAGE_DIR)/rootfs/amd64 $(GO) test -count=1 -timeout 10m -v -run '^TestImage' . \
		> ../target/e2e/image-test.log 2>&1; rc=$$?; \
		grep -E '^ *(--- |ok |FAIL|control plane)|image_test' ../target/e2e/image-test.log; \
		if [ $$rc -ne 0 ]; then tail -n 100 ../target/e2e/image-test.log; fi; exit $$rc; }

## test-image-tool: cdplace-image's own tests (layers byte-identical whatever the walk order and
## file times, the pin edits only values.yaml's image block); in `make test`
test-image-tool:
	@test -z "$$(cd e2e/tools/image && gofmt -l .)" || { echo "gofmt would change:"; cd e2e/tools/image && gofmt -l .; exit 1; }
	cd e2e/tools/image && $(GO) vet ./... && $(GO) test -count=1 ./...

## crane: go-containerregistry's crane, from the version e2e/tools/image/go.mod pins, to push the
## image: crane push target/image/oci <repository>:<version>
crane:
	mkdir -p $(E2E_BIN)
	cd e2e/tools/image && $(GO) build -trimpath -o ../../../$(E2E_BIN)/crane github.com/google/go-containerregistry/cmd/crane

## image-repro: reproducibility across checkout paths: builds the image again in a second worktree
## of HEAD at IMAGE_REPRO_DIR (its own target/, so every Rust and Go output is rebuilt there) and
## compares the digests with this checkout's; needs a clean checkout (a dirty one names another
## revision)
IMAGE_REPRO_DIR ?= /tmp/cdplace-image-repro
.PHONY: image-repro
image-repro: image-build
	@! git status --porcelain -- $(IMAGE_INPUTS) | grep -q . || { echo "image-repro: commit the image's inputs first"; exit 1; }
	rm -rf $(IMAGE_REPRO_DIR) && git worktree prune
	git worktree add --detach $(IMAGE_REPRO_DIR) HEAD
	$(MAKE) -C $(IMAGE_REPRO_DIR) image-build
	diff $(IMAGE_DIR)/digests.json $(IMAGE_REPRO_DIR)/$(IMAGE_DIR)/digests.json && \
		echo "image-repro: $(CURDIR) and $(IMAGE_REPRO_DIR) built the same image"
	git worktree remove --force $(IMAGE_REPRO_DIR)

## dist: the kubectl plugin as krew archives in target/dist: kubectl-cdplace_linux_amd64.tar.gz
## (this machine's build, stripped) and, with DIST_ARM64=1, kubectl-cdplace_linux_arm64.tar.gz
## (cross-built: `rustup target add aarch64-unknown-linux-gnu` and Debian's gcc-aarch64-linux-gnu).
## The archives are reproducible for a given binary (sorted, owner 0, mtime 0, gzip -n).
## krew-manifest: kube-scheduler-config/krew/cdplace.yaml from those archives (URIs under
## KREW_BASE_URL, their sha256). test-krew: krew (pinned in e2e/tools/krew/go.mod) installs the
## plugin from that manifest and archive, and the installed `kubectl-cdplace` runs (e2e/krew_test.go)
DIST := target/dist
CLI_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
KREW_BASE_URL ?= https://github.com/cdplace/cdplace/releases/download/v$(CLI_VERSION)
KREW := $(E2E_BIN)/krew
DIST_ARM64 ?=
.PHONY: dist krew-manifest krew test-krew
dist: build
	rm -rf $(DIST) && mkdir -p $(DIST)/linux_amd64
	strip -o $(DIST)/linux_amd64/kubectl-cdplace target/release/kubectl-cdplace
	if [ -n "$(DIST_ARM64)" ]; then \
		CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
		CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
		$(CARGO) build --release -p cdplace-cli --bin kubectl-cdplace --target aarch64-unknown-linux-gnu && \
		mkdir -p $(DIST)/linux_arm64 && \
		aarch64-linux-gnu-strip -o $(DIST)/linux_arm64/kubectl-cdplace target/aarch64-unknown-linux-gnu/release/kubectl-cdplace; \
	fi
	for d in $(DIST)/*/; do p=$$(basename $$d); \
		tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C $$d -cf - kubectl-cdplace \
			| gzip -n -9 > $(DIST)/kubectl-cdplace_$$p.tar.gz; done

krew-manifest: dist
	kube-scheduler-config/krew/manifest.sh $(CLI_VERSION) $(KREW_BASE_URL) $(DIST)/kubectl-cdplace_*.tar.gz \
		> kube-scheduler-config/krew/cdplace.yaml

krew: $(KREW)

$(KREW): e2e/tools/krew/go.mod e2e/tools/krew/go.sum
	mkdir -p $(E2E_BIN)
	cd e2e/tools/krew && $(GO) build -trimpath -o ../../../$@ sigs.k8s.io/krew/cmd/krew

test-krew: krew-manifest krew lint-e2e
	cd e2e && CDPLACE_KREW_BIN=$(CURDIR)/$(KREW) $(GO) test -count=1 -v -run '^TestKrew' .
