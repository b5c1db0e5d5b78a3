// Package facts reads the few facts the cdplace policy uses from Kubernetes objects, one
// function per kind, and owns every field path, label and annotation key that reading needs
// (this file). It is the Go twin of host-shim/lib/src/extract.rs: the same objects give the same
// facts (testdata/vectors.yaml holds objects with the facts both must give), so the scheduler
// extracts in Go and only the facts cross into the library, packed (internal/cdplace encodes
// them). Only the opaque parameters of the compute-domain driver's configs are parsed as JSON.
package facts

import "k8s.io/apimachinery/pkg/runtime/schema"

// Keys are the names the validated plugin arguments configure (the policy's settings).
type Keys struct {
	// CliqueLabel is the node label holding `<clusterUUID>.<cliqueID>`.
	CliqueLabel string `json:"cliqueLabel"`
	// GPUResourceName is the extended resource through which pods may ask for GPUs.
	GPUResourceName string `json:"gpuResourceName"`
	// GPUDriver is the DRA driver (and device class) of GPUs.
	GPUDriver string `json:"gpuDriver"`
	// ComputeDomainDriver is the DRA driver of ComputeDomain channels and daemons.
	ComputeDomainDriver string `json:"computeDomainDriver"`
	// SizeAnnotation declares, on a ComputeDomain or its pods, how many pods the domain has.
	SizeAnnotation string `json:"sizeAnnotation"`
}

// DefaultKeys are the keys of the policy's default arguments (tests and fixtures).
var DefaultKeys = Keys{
	CliqueLabel:         "nvidia.com/gpu.clique",
	GPUResourceName:     "nvidia.com/gpu",
	GPUDriver:           "gpu.nvidia.com",
	ComputeDomainDriver: "compute-domain.nvidia.com",
	SizeAnnotation:      "cdplace.nvidia.com/size",
}

// Labels the NVIDIA driver sets.
const (
	// DomainLabel is set on a node at Prepare (and removed at Unprepare) with the UID of the
	// ComputeDomain there, and on the driver's templates with the UID of their domain.
	DomainLabel = "resource.nvidia.com/computeDomain"
	// TargetLabel says what a ComputeDomain template is for: Workload or Daemon (TargetDaemon).
	TargetLabel  = "resource.nvidia.com/computeDomainTarget"
	TargetDaemon = "Daemon"
)

// The opaque config parameters of the compute-domain driver that name a domain.
const (
	channelConfigKind = "ComputeDomainChannelConfig"
	daemonConfigKind  = "ComputeDomainDaemonConfig"
	paramKind         = "kind"
	paramDomainID     = "domainID"
)

// Device requests and ResourceSlice devices.
const (
	allocationModeAll = "All"
	// A GPU driver device is a GPU when its attribute `type` is absent or "gpu" (not mig, vfio).
	deviceTypeAttribute = "type"
	deviceTypeGPU       = "gpu"
)

// Pod phases in which a pod holds nothing any more.
const (
	phaseSucceeded = "Succeeded"
	phaseFailed    = "Failed"
)

// ComputeDomainGVR is the NVIDIA ComputeDomain resource (read unstructured: the scheduler has
// no Go types for it).
var ComputeDomainGVR = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

// PodGroupGVR is the Workload API's PodGroup (read unstructured: served only with the
// GenericWorkload gate).
var PodGroupGVR = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}

// Field paths of the unstructured kinds, and their names in messages.
var (
	numNodesPath        = []string{"spec", "numNodes"}
	channelTemplatePath = []string{"spec", "channel", "resourceClaimTemplate", "name"}
	minCountPath        = []string{"spec", "schedulingPolicy", "gang", "minCount"}
	priorityPath        = []string{"spec", "priority"}
)

// ownerKinds are the controllers whose pods get an owner key (`<Kind>/<namespace>/<name>`),
// by kind, with their API group.
var ownerKinds = map[string]string{
	"Job":             "batch",
	"StatefulSet":     "apps",
	"ReplicaSet":      "apps",
	"LeaderWorkerSet": "leaderworkerset.x-k8s.io",
}
