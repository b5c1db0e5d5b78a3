#!/usr/bin/env bash
# Runs cdplace's placement scenarios on a kind cluster (see README.md next to this file):
# creates the cluster, builds and loads the computedomain-scheduler image, fakes two NVLink cliques
# of 4 GB200 trays on the kind workers, deploys kube-scheduler-config/deploy, plays the NVIDIA
# driver's controller for each ComputeDomain, and checks where the scheduler puts the pods.
#
# Scheduling only: kind has no NVIDIA kubelet plugin, so bound pods never start (kubelet reports
# that compute-domain.nvidia.com is not registered). The checks look at spec.nodeName and the
# PodScheduled condition.
#
# Usage: e2e/kind/run.sh [--keep] [--skip-build]
# Environment: CLUSTER_NAME (cdplace-e2e), KIND_NODE_IMAGE (kindest/node:v1.37.0),
#              IMAGE (the image deploy/deployment.yaml names), WAIT_TIMEOUT (seconds, 180).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "${SCRIPT_DIR}/../.." && pwd)
DEPLOY_DIR="${REPO_ROOT}/kube-scheduler-config/deploy"

CLUSTER_NAME=${CLUSTER_NAME:-cdplace-e2e}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.37.0}
# The image deploy/deployment.yaml runs (imagePullPolicy: IfNotPresent, so the loaded one is used).
DEPLOY_IMAGE=$(sed -n 's/^[[:space:]]*image:[[:space:]]*//p' "${DEPLOY_DIR}/deployment.yaml" | head -n 1)
IMAGE=${IMAGE:-$DEPLOY_IMAGE}
WAIT_TIMEOUT=${WAIT_TIMEOUT:-180}

SCHEDULER_NS=cdplace-system
SCHEDULER_NAME=computedomain-scheduler
CLIQUE_LABEL=nvidia.com/gpu.clique
DOMAIN_LABEL=cdplace.e2e/domain
# Marks the namespaces of the checks, so a rerun on a kept cluster can remove the old ones.
CHECK_NS_LABEL=cdplace.e2e/kind-check
TRAYS_PER_CLIQUE=4
GPUS_PER_TRAY=4
# Clique label values, <NVLink cluster UUID>.<clique ID> as GPU Feature Discovery writes them:
# two racks of one clique each.
CLIQUES=(
  "5b1f7d0c-3a9e-4c61-8e21-0c7a2d4f9b10.32766"
  "9e4a2c81-6d07-4b3f-8a5c-71f0e3b6d2a4.32766"
)

KEEP=false
SKIP_BUILD=false
CLUSTER_IN_USE=false
PASSED=0
FAILED=0

log() { printf '==> %s\n' "$*"; }
err() { printf 'error: %s\n' "$*" >&2; }
die() {
  err "$*"
  exit 1
}

# kubectl against the kind cluster, whatever the current context is.
k() { kubectl --context "kind-${CLUSTER_NAME}" "$@"; }

usage() {
  sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

parse_args() {
  while (($# > 0)); do
    case "$1" in
      --keep) KEEP=true ;;
      --skip-build) SKIP_BUILD=true ;;
      -h | --help)
        usage
        exit 0
        ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
  done
}

check_tools() {
  local tool missing=()
  for tool in docker kind kubectl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  ((${#missing[@]} == 0)) || die "missing tools: ${missing[*]}"
  docker info >/dev/null 2>&1 || die "docker cannot reach a Docker engine (is it running?)"
  [[ -n "$IMAGE" ]] || die "no image name: set IMAGE (none found in ${DEPLOY_DIR}/deployment.yaml)"
  [[ "$WAIT_TIMEOUT" =~ ^[0-9]+$ ]] || die "WAIT_TIMEOUT must be a number of seconds, not '${WAIT_TIMEOUT}'"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ "$CLUSTER_IN_USE" == true ]]; then
    if [[ "$KEEP" == true ]]; then
      log "keeping cluster ${CLUSTER_NAME}: kubectl --context kind-${CLUSTER_NAME} ...; remove it with: kind delete cluster --name ${CLUSTER_NAME}"
    else
      log "deleting cluster ${CLUSTER_NAME} (--keep leaves it)"
      kind delete cluster --name "$CLUSTER_NAME" || err "kind delete cluster --name ${CLUSTER_NAME} failed"
    fi
  fi
  exit "$rc"
}

# Joins the lines of $1 with spaces.
oneline() { printf '%s\n' "$1" | awk 'NF' | paste -sd ' ' -; }

# Polls "$@" every 2 seconds until it succeeds or $1 seconds have passed.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 2
  done
}

# ---- cluster and image -------------------------------------------------------------------------

create_cluster() {
  if kind get clusters 2>/dev/null | grep -Fx -- "$CLUSTER_NAME" >/dev/null; then
    log "reusing kind cluster ${CLUSTER_NAME}"
    CLUSTER_IN_USE=true
    # Make sure the kubeconfig has the context (e.g. after another cluster replaced it).
    kind export kubeconfig --name "$CLUSTER_NAME"
  else
    log "creating kind cluster ${CLUSTER_NAME} (${KIND_NODE_IMAGE})"
    CLUSTER_IN_USE=true
    kind create cluster --name "$CLUSTER_NAME" --image "$KIND_NODE_IMAGE" \
      --config "${SCRIPT_DIR}/cluster.yaml" --wait 300s
  fi
  k wait --for=condition=Ready nodes --all --timeout=300s
}

build_image() {
  if [[ "$SKIP_BUILD" == true ]]; then
    docker image inspect "$IMAGE" >/dev/null 2>&1 || die "--skip-build, but there is no local image ${IMAGE}"
    log "using the local image ${IMAGE} (--skip-build)"
  else
    # `make image-build` builds the image without a container engine (the working tree's, not
    # checked against kube-scheduler-config/image.lock) and writes one docker archive per platform.
    local arch archive loaded
    case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) die "no image for $(uname -m)" ;; esac
    log "building the image (make image-build; the Rust and Go builds take a while)"
    (cd "$REPO_ROOT" && make image-build)
    archive=$(ls "$REPO_ROOT"/target/image/kube-scheduler-*-linux-"$arch".docker.tar | head -n 1)
    log "loading ${archive} as ${IMAGE}"
    loaded=$(docker load -i "$archive" | sed -n 's/^Loaded image: //p' | head -n 1)
    [[ -n "$loaded" ]] || die "docker load ${archive} named no image"
    [[ "$loaded" == "$IMAGE" ]] || docker tag "$loaded" "$IMAGE"
  fi
  log "loading ${IMAGE} into the kind nodes"
  kind load docker-image "$IMAGE" --name "$CLUSTER_NAME"
}

# ---- fake hardware and the NVIDIA driver's cluster-wide objects --------------------------------

worker_nodes() {
  k get nodes -l '!node-role.kubernetes.io/control-plane' \
    -o go-template='{{range .items}}{{.metadata.name}}{{"\n"}}{{end}}' | LC_ALL=C sort
}

# The two ResourceSlices the NVIDIA driver's kubelet plugins publish for a node: one pool per node
# and driver, pool name = node name (as e2e/harness/fleet.go builds them).
node_slices() {
  local node=$1 i
  cat <<EOF
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: ${node}-gpu.nvidia.com
  labels:
    cdplace.e2e/fleet: kind
spec:
  driver: gpu.nvidia.com
  nodeName: ${node}
  pool:
    name: ${node}
    generation: 1
    resourceSliceCount: 1
  devices:
EOF
  for ((i = 0; i < GPUS_PER_TRAY; i++)); do
    cat <<EOF
  - name: gpu-${i}
    attributes:
      type: {string: gpu}
      uuid: {string: GPU-${node}-${i}}
      productName: {string: NVIDIA GB200}
      architecture: {string: Blackwell}
      index: {int: ${i}}
      minor: {int: ${i}}
    capacity:
      memory: {value: 189471Mi}
EOF
  done
  cat <<EOF
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: ${node}-compute-domain.nvidia.com
  labels:
    cdplace.e2e/fleet: kind
spec:
  driver: compute-domain.nvidia.com
  nodeName: ${node}
  pool:
    name: ${node}
    generation: 1
    resourceSliceCount: 1
  devices:
  - name: channel-0
    attributes:
      type: {string: channel}
      id: {int: 0}
  - name: daemon-0
    attributes:
      type: {string: daemon}
      id: {int: 0}
EOF
}

# The DeviceClasses the NVIDIA driver's chart installs.
device_classes() {
  cat <<'EOF'
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.nvidia.com
spec:
  selectors:
  - cel:
      expression: 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"'
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: compute-domain-default-channel.nvidia.com
spec:
  selectors:
  - cel:
      expression: 'device.driver == "compute-domain.nvidia.com" && device.attributes["compute-domain.nvidia.com"].type == "channel" && device.attributes["compute-domain.nvidia.com"].id == 0'
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: compute-domain-daemon.nvidia.com
spec:
  selectors:
  - cel:
      expression: 'device.driver == "compute-domain.nvidia.com" && device.attributes["compute-domain.nvidia.com"].type == "daemon"'
EOF
}

# Labels the workers with their clique, gives each `nvidia.com/gpu: 4`, and publishes their
# ResourceSlices. The extended resource is set through the node's status subresource: the kubelet
# keeps capacity entries it does not manage and copies them into allocatable, but a kubelet
# restart on a recreated node, or a device plugin for nvidia.com/gpu, would reset it. The kubelet
# also deletes its node's ResourceSlices when it starts (no DRA driver has registered yet), so
# after a node restart rerun the script.
fake_hardware() {
  local list workers=() node i=0 clique slices=""
  list=$(worker_nodes)
  while IFS= read -r node; do
    if [[ -n "$node" ]]; then workers+=("$node"); fi
  done <<<"$list"
  local want=$((${#CLIQUES[@]} * TRAYS_PER_CLIQUE))
  ((${#workers[@]} == want)) ||
    die "want ${want} worker nodes (${#CLIQUES[@]} cliques of ${TRAYS_PER_CLIQUE}), found ${#workers[@]}: ${workers[*]:-none}"

  log "faking ${#CLIQUES[@]} NVLink cliques of ${TRAYS_PER_CLIQUE} trays, ${GPUS_PER_TRAY} GPUs each"
  local patch
  patch=$(printf '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"%s"},{"op":"add","path":"/status/allocatable/nvidia.com~1gpu","value":"%s"}]' \
    "$GPUS_PER_TRAY" "$GPUS_PER_TRAY")
  for node in "${workers[@]}"; do
    clique=${CLIQUES[i / TRAYS_PER_CLIQUE]}
    k label node "$node" --overwrite \
      "${CLIQUE_LABEL}=${clique}" \
      nvidia.com/gpu.present=true \
      nvidia.com/gpu.product=NVIDIA-GB200 \
      "nvidia.com/gpu.count=${GPUS_PER_TRAY}" \
      cdplace.e2e/fleet=kind >/dev/null
    k patch node "$node" --subresource=status --type=json -p "$patch" >/dev/null
    slices+=$(node_slices "$node")$'\n'
    printf '    %s  %s=%s  nvidia.com/gpu=%s\n' "$node" "$CLIQUE_LABEL" "$clique" "$GPUS_PER_TRAY"
    i=$((i + 1))
  done

  log "installing the ComputeDomain CRD and the NVIDIA DeviceClasses"
  k apply -f "${REPO_ROOT}/e2e/manifests/computedomain-crd.yaml"
  k wait --for=condition=Established crd/computedomains.resource.nvidia.com --timeout=60s
  device_classes | k apply -f -
  log "publishing the gpu.nvidia.com and compute-domain.nvidia.com ResourceSlices"
  printf '%s' "$slices" | k apply -f - >/dev/null
}

# Every worker still has its clique label and nvidia.com/gpu in allocatable.
hardware_intact() {
  local list node gpus clique ok=0
  list=$(worker_nodes) || return 1
  while IFS= read -r node; do
    [[ -n "$node" ]] || continue
    gpus=$(k get node "$node" -o go-template='{{index .status.allocatable "nvidia.com/gpu"}}')
    clique=$(k get node "$node" -o go-template="{{index .metadata.labels \"${CLIQUE_LABEL}\"}}")
    if [[ "$gpus" != "$GPUS_PER_TRAY" || -z "$clique" || "$clique" == "<no value>" ]]; then
      err "node ${node}: allocatable nvidia.com/gpu='${gpus}', ${CLIQUE_LABEL}='${clique}'"
      ok=1
    fi
  done <<<"$list"
  return "$ok"
}

# ---- the scheduler -----------------------------------------------------------------------------

deploy_scheduler() {
  local existed=false
  k -n "$SCHEDULER_NS" get deployment "$SCHEDULER_NAME" >/dev/null 2>&1 && existed=true
  log "deploying ${SCHEDULER_NAME} (kubectl apply -k kube-scheduler-config/deploy)"
  k apply -k "$DEPLOY_DIR"
  if [[ "$IMAGE" != "$DEPLOY_IMAGE" ]]; then
    k -n "$SCHEDULER_NS" set image "deployment/${SCHEDULER_NAME}" "kube-scheduler=${IMAGE}"
  fi
  if [[ "$existed" == true ]]; then
    # Same tag, possibly a new image: restart so the pods run what was just loaded.
    k -n "$SCHEDULER_NS" rollout restart "deployment/${SCHEDULER_NAME}"
  fi
  if ! k -n "$SCHEDULER_NS" rollout status "deployment/${SCHEDULER_NAME}" --timeout=300s; then
    scheduler_diagnostics
    die "${SCHEDULER_NAME} did not roll out"
  fi
  log "waiting for a ${SCHEDULER_NAME} pod to hold the leader lease"
  if ! wait_until 120 leader_elected; then
    scheduler_diagnostics
    die "no running ${SCHEDULER_NAME} pod became leader"
  fi
}

# The lease's holder (<pod name>_<uuid>) is one of the current, not deleted, scheduler pods.
leader_elected() {
  local holder pods
  holder=$(k -n "$SCHEDULER_NS" get lease "$SCHEDULER_NAME" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) || return 1
  [[ -n "$holder" ]] || return 1
  pods=$(k -n "$SCHEDULER_NS" get pods -l "app.kubernetes.io/name=${SCHEDULER_NAME}" \
    -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}') || return 1
  printf '%s\n' "$pods" | grep -Fx -- "${holder%%_*}" >/dev/null
}

scheduler_diagnostics() {
  k -n "$SCHEDULER_NS" get pods -o wide || true
  k -n "$SCHEDULER_NS" describe pods -l "app.kubernetes.io/name=${SCHEDULER_NAME}" | tail -n 40 || true
  k -n "$SCHEDULER_NS" logs -l "app.kubernetes.io/name=${SCHEDULER_NAME}" --prefix --tail=40 || true
}

# ---- workloads ---------------------------------------------------------------------------------

new_namespace() {
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $1
  labels:
    ${CHECK_NS_LABEL}: "true"
EOF
  # Pods are refused until the ServiceAccount controller has created the default ServiceAccount.
  wait_until 60 k -n "$1" get serviceaccount default -o name >/dev/null 2>&1 ||
    die "namespace $1 has no default ServiceAccount"
}

# Removes the namespaces of earlier runs (a kept cluster), waiting until they are gone.
remove_old_checks() {
  k delete namespace -l "${CHECK_NS_LABEL}=true" --ignore-not-found --wait=true --timeout=180s >/dev/null
}

# create_domain NS NAME SIZE GPUS: a ComputeDomain with cdplace's size annotation, the workload
# ResourceClaimTemplate the NVIDIA driver's controller would create for it, and SIZE pods shaped
# like kube-scheduler-config/examples/computedomain-pods.yaml, each asking GPUS nvidia.com/gpu.
create_domain() {
  local ns=$1 cd=$2 size=$3 gpus=$4 uid template i
  k create -f - >/dev/null <<EOF
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: ${cd}
  namespace: ${ns}
  annotations:
    cdplace.nvidia.com/size: "${size}"
spec:
  numNodes: 0
  channel:
    resourceClaimTemplate:
      name: ${cd}-channel
EOF
  uid=$(k -n "$ns" get computedomain "$cd" -o jsonpath='{.metadata.uid}')
  template=$(k -n "$ns" get computedomain "$cd" -o jsonpath='{.spec.channel.resourceClaimTemplate.name}')
  [[ -n "$uid" && -n "$template" ]] || die "ComputeDomain ${ns}/${cd}: no UID or template name"
  # The driver's controller: labels and opaque ComputeDomainChannelConfig as upstream's workload
  # template has them (e2e/harness/driver.go). Its finalizer is left out, so that deleting the
  # namespace needs no controller to remove it.
  k create -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: ${template}
  namespace: ${ns}
  labels:
    resource.nvidia.com/computeDomain: ${uid}
    resource.nvidia.com/computeDomainTarget: Workload
spec:
  spec:
    devices:
      requests:
      - name: channel
        exactly:
          deviceClassName: compute-domain-default-channel.nvidia.com
      config:
      - requests: [channel]
        opaque:
          driver: compute-domain.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: ComputeDomainChannelConfig
            domainID: ${uid}
            allocationMode: Single
EOF
  for ((i = 0; i < size; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  name: ${cd}-${i}
  namespace: ${ns}
  labels:
    ${DOMAIN_LABEL}: ${cd}
spec:
  schedulerName: ${SCHEDULER_NAME}
  terminationGracePeriodSeconds: 1
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: ${CLIQUE_LABEL}
            operator: Exists
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      limits:
        nvidia.com/gpu: ${gpus}
      claims:
      - name: imex-channel
  resourceClaims:
  - name: imex-channel
    resourceClaimTemplateName: ${template}
EOF
  done | k create -f - >/dev/null
  log "created ComputeDomain ${ns}/${cd} (uid ${uid}), its template ${template} and ${size} pods asking ${gpus} GPUs"
}

# Lines "<pod> <node or ->" for the domain's pods.
domain_pods() {
  k -n "$1" get pods -l "${DOMAIN_LABEL}=$2" \
    -o go-template='{{range .items}}{{.metadata.name}} {{or .spec.nodeName "-"}}{{"\n"}}{{end}}'
}

# The nodes the domain's pods are bound to, one per bound pod.
domain_nodes() {
  domain_pods "$1" "$2" | awk '$2 != "-" { print $2 }'
}

clique_of() {
  k get node "$1" -o go-template="{{index .metadata.labels \"${CLIQUE_LABEL}\"}}"
}

scheduled_message() {
  k -n "$1" get pod "$2" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}'
}

# all_bound NS CD N: N pods of CD exist and all are bound.
all_bound() {
  local rows
  rows=$(domain_pods "$1" "$2") || return 1
  printf '%s\n' "$rows" | awk -v n="$3" 'NF { pods++; if ($2 != "-") bound++ } END { exit !(pods == n && bound == n) }'
}

# all_refused NS CD N TEXT: N pods of CD exist, none is bound, and each has a PodScheduled
# message containing TEXT.
all_refused() {
  local ns=$1 cd=$2 n=$3 text=$4 rows pod node count=0
  rows=$(domain_pods "$ns" "$cd") || return 1
  while read -r pod node; do
    [[ -n "$pod" ]] || continue
    [[ "$node" == "-" ]] || return 1
    [[ "$(scheduled_message "$ns" "$pod")" == *"$text"* ]] || return 1
    count=$((count + 1))
  done <<<"$rows"
  ((count == n))
}

# none_bound NS CD: no pod of CD is bound.
none_bound() {
  local nodes
  nodes=$(domain_nodes "$1" "$2") || return 1
  [[ -z "$nodes" ]]
}

# ---- checks ------------------------------------------------------------------------------------

report() {
  local name=$1 ok=$2 detail=$3
  if [[ "$ok" == true ]]; then
    PASSED=$((PASSED + 1))
    printf 'PASS  %s: %s\n' "$name" "$detail"
  else
    FAILED=$((FAILED + 1))
    printf 'FAIL  %s: %s\n' "$name" "$detail"
  fi
}

check_diagnostics() {
  local ns=$1 pod
  k -n "$ns" get pods -o wide || true
  while IFS= read -r pod; do
    [[ -n "$pod" ]] || continue
    printf '    %s PodScheduled: %s\n' "$pod" "$(scheduled_message "$ns" "$pod" || true)"
  done < <(k -n "$ns" get pods -o go-template='{{range .items}}{{.metadata.name}}{{"\n"}}{{end}}' || true)
  k -n "$SCHEDULER_NS" logs -l "app.kubernetes.io/name=${SCHEDULER_NAME}" --prefix --tail=20 || true
}

# (a) Domains of 3 and 4 trays on two cliques of 4: every pod bound, each domain in one clique,
# one pod per tray.
check_two_domains() {
  local ns=cdplace-e2e-a name="(a) domains of 3 and 4 trays each stay in one clique"
  local domain cd size nodes cliques ok=true detail=""
  new_namespace "$ns"
  create_domain "$ns" cd3 3 "$GPUS_PER_TRAY"
  create_domain "$ns" cd4 4 "$GPUS_PER_TRAY"
  for domain in cd3:3 cd4:4; do
    cd=${domain%:*}
    size=${domain#*:}
    if ! wait_until "$WAIT_TIMEOUT" all_bound "$ns" "$cd" "$size"; then
      ok=false
      detail+="${cd}: not all ${size} pods bound within ${WAIT_TIMEOUT}s; "
      continue
    fi
    nodes=$(domain_nodes "$ns" "$cd")
    cliques=$(for node in $nodes; do
      clique_of "$node"
      echo
    done | LC_ALL=C sort -u | awk 'NF')
    if [[ $(printf '%s\n' "$cliques" | awk 'NF' | wc -l) -ne 1 ]]; then
      ok=false
      detail+="${cd} spans cliques: $(oneline "$cliques") (nodes: $(oneline "$nodes")); "
    elif [[ $(printf '%s\n' "$nodes" | LC_ALL=C sort -u | wc -l) -ne "$size" ]]; then
      ok=false
      detail+="${cd} has two pods on one tray: $(oneline "$nodes"); "
    else
      detail+="${cd}: ${size}/${size} in clique ${cliques}; "
    fi
  done
  report "$name" "$ok" "${detail%; }"
  [[ "$ok" == true ]] || check_diagnostics "$ns"
  k delete namespace "$ns" --wait=false >/dev/null
}

# check_refused NAME NS CD SIZE GPUS TEXT: the domain's pods stay unbound, each with a PodScheduled
# message containing TEXT, and still none is bound a little later.
check_refused() {
  local name=$1 ns=$2 cd=$3 size=$4 gpus=$5 text=$6 ok=true detail
  new_namespace "$ns"
  create_domain "$ns" "$cd" "$size" "$gpus"
  if ! wait_until "$WAIT_TIMEOUT" all_refused "$ns" "$cd" "$size" "$text"; then
    ok=false
    detail="within ${WAIT_TIMEOUT}s, not all ${size} pods were unbound with a PodScheduled message containing \"${text}\""
  else
    sleep 10
    if none_bound "$ns" "$cd"; then
      detail="${size} pods unbound: \"$(scheduled_message "$ns" "${cd}-0")\""
    else
      ok=false
      detail="pods were bound after first being refused: $(oneline "$(domain_nodes "$ns" "$cd")")"
    fi
  fi
  report "$name" "$ok" "$detail"
  [[ "$ok" == true ]] || check_diagnostics "$ns"
  k delete namespace "$ns" --wait=false >/dev/null
}

run_checks() {
  log "removing namespaces of earlier checks, if any"
  remove_old_checks
  hardware_intact || die "the fake hardware is gone (kubelet restarted?); rerun the script"
  log "running the placement checks (scheduling only)"
  check_two_domains
  check_refused "(b) a domain of 5 trays, larger than any clique, stays unbound" \
    cdplace-e2e-b big 5 "$GPUS_PER_TRAY" "needs 5 trays in one NVLink clique"
  check_refused "(c) a domain of pods asking 2 of 4 GPUs is refused (wholeTray: Require)" \
    cdplace-e2e-c six 3 2 "would strand 2"
  printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
  ((FAILED == 0))
}

main() {
  parse_args "$@"
  check_tools
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  create_cluster
  build_image
  fake_hardware
  deploy_scheduler
  run_checks
}

# Sourcing the file (for a dry run of single steps) defines the functions without running main.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
