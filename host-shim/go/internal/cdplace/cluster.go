package cdplace

// #include "cdplace.h"
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Runtime is the compiled policy component; safe for concurrent use.
type Runtime struct {
	ptr *C.cdplace_runtime_t
}

// NewRuntime compiles a component. Limits are per cluster (from its args), not here.
func NewRuntime(wasm []byte) (*Runtime, error) {
	if len(wasm) == 0 {
		return nil, &Error{Kind: ErrLoad, Message: "cdplace: the policy component is empty (run `make guest`)"}
	}
	var out *C.cdplace_runtime_t
	p, n := bytesOf(wasm)
	crossings.Add(1)
	err := take(C.cdplace_runtime_new(p, n, &out))
	runtime.KeepAlive(wasm)
	if err != nil {
		return nil, err
	}
	r := &Runtime{ptr: out}
	runtime.SetFinalizer(r, func(r *Runtime) { C.cdplace_runtime_delete(r.ptr) })
	return r, nil
}

// Cluster is the cluster view and the policy instances deciding on it; safe for concurrent use.
type Cluster struct {
	ptr       *C.cdplace_cluster_t
	rt        *Runtime // keeps the runtime alive
	crossings atomic.Uint64
	// rec records every call (record.go); nil when off. recMu orders the view-changing calls
	// (exclusive) against the decisions (shared) while recording.
	rec   Recorder
	recMu sync.RWMutex
}

// SetRecorder makes the cluster report every call to rec (nil: stop). Set it before the
// cluster is used concurrently.
func (c *Cluster) SetRecorder(rec Recorder) { c.rec = rec }

// RecordPolicy tells the recorder, if any, that a swap made the component of digest the deciding
// policy as generation (the swapper calls it after Swap returns).
func (c *Cluster) RecordPolicy(generation uint64, digest string) {
	if c.rec == nil {
		return
	}
	c.recMu.Lock()
	defer c.recMu.Unlock()
	c.rec.Policy(generation, digest)
}

// viewChange runs a view-changing call, recorded in order when a recorder is set.
func (c *Cluster) viewChange(call func() error, record func(Recorder)) error {
	if c.rec == nil {
		return call()
	}
	c.recMu.Lock()
	defer c.recMu.Unlock()
	err := call()
	record(c.rec)
	return err
}

// decide runs a decision at the policy time it takes now, recorded (with the position it was
// made on) when a recorder is set.
func (c *Cluster) decide(kind CallKind, namespace, name string, overlay []byte, call func(nowMs int64) ([]byte, error)) ([]byte, error) {
	now := time.Now().UnixMilli()
	if c.rec == nil {
		return call(now)
	}
	c.recMu.RLock()
	defer c.recMu.RUnlock()
	out, err := call(now)
	c.rec.Decision(kind, now, namespace, name, overlay, out, err)
	return out, err
}

// NewCluster makes a cluster view under the plugin arguments: the raw pluginConfig args as a
// JSON object, every field (the policy is their only validator). Invalid arguments give an
// error wrapping ErrInvalidArgs with the policy's message.
func NewCluster(rt *Runtime, args []byte) (*Cluster, error) {
	var out *C.cdplace_cluster_t
	p, n := charsOf(args)
	crossings.Add(1)
	err := take(C.cdplace_cluster_new(rt.ptr, p, n, &out))
	runtime.KeepAlive(args)
	runtime.KeepAlive(rt)
	if err != nil {
		return nil, err
	}
	c := &Cluster{ptr: out, rt: rt}
	runtime.SetFinalizer(c, func(c *Cluster) { C.cdplace_cluster_delete(c.ptr) })
	return c, nil
}

// Close frees the cluster's view and policy instances now instead of at the next garbage
// collection (each instance reserves its guest memory's address space, so code that makes
// many clusters must close them). No call may be running or made after it; a second Close
// does nothing.
func (c *Cluster) Close() {
	if c.ptr == nil {
		return
	}
	runtime.SetFinalizer(c, nil)
	C.cdplace_cluster_delete(c.ptr)
	c.ptr = nil
}

// Crossings is how many calls were made into the library for this cluster.
func (c *Cluster) Crossings() uint64 { return c.crossings.Load() }

func (c *Cluster) cross() {
	c.crossings.Add(1)
	crossings.Add(1)
}

// Settings are what the host takes from the validated arguments.
type Settings struct {
	// Keys configure fact extraction.
	facts.Keys
	// GuestPath is the component to load instead of the embedded one, nil for the embedded.
	GuestPath *string `json:"guestPath"`
	// CallTimeoutMs bounds one policy call.
	CallTimeoutMs uint64 `json:"callTimeoutMs"`
	// MemoryLimitMiB bounds one policy instance's memory.
	MemoryLimitMiB uint64 `json:"memoryLimitMiB"`
	// PlainPodSteering: pods without a ComputeDomain are steered (Cluster.Steer).
	PlainPodSteering bool `json:"plainPodSteering"`
	// MaxPolicyInstances: most policy instances alive at once (maxPolicyInstances).
	MaxPolicyInstances uint64 `json:"maxPolicyInstances"`
}

// Settings returns the validated arguments the host needs.
func (c *Cluster) Settings() (Settings, error) {
	var out C.cdplace_bytes_t
	c.cross()
	err := take(C.cdplace_cluster_settings(c.ptr, &out))
	runtime.KeepAlive(c)
	if err != nil {
		return Settings{}, err
	}
	var s Settings
	if err := json.Unmarshal(takeBytes(&out), &s); err != nil {
		return Settings{}, fmt.Errorf("cdplace: decoding the cluster's settings: %w", err)
	}
	return s, nil
}

// Stats is how a cluster's journal and policy instances stand (cdplace_stats_t).
type Stats struct {
	// JournalLength is how many deltas are journaled for instances that are behind.
	JournalLength uint64
	// IdleInstances wait for a call; BusyInstances are in one.
	IdleInstances, BusyInstances uint64
	// QuarantinedObjects are held out of the view: their facts trap the guest.
	QuarantinedObjects uint64
	// PolicyViolations counts the PreFilter answers the library refused because they broke a
	// safety rule (ErrPolicyViolation).
	PolicyViolations uint64
}

// Quarantined is an object dropped from the view because applying its facts trapped the guest
// (until its next update or deletion).
type Quarantined struct {
	// Kind: Node, Pod, ResourceClaim, ResourceClaimTemplate, ComputeDomain, PodGroup or Owner.
	Kind string `json:"kind"`
	// Namespace is empty for cluster-scoped kinds and owners.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Error is the guest's failure.
	Error string `json:"error"`
}

// TakeQuarantined returns the objects quarantined since the last call, each once.
func (c *Cluster) TakeQuarantined() ([]Quarantined, error) {
	var out C.cdplace_bytes_t
	err := take(C.cdplace_cluster_take_quarantined(c.ptr, &out))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	var q []Quarantined
	if err := json.Unmarshal(takeBytes(&out), &q); err != nil {
		return nil, fmt.Errorf("cdplace: decoding the quarantined objects: %w", err)
	}
	return q, nil
}

// Stats reads how the journal and the instances stand now (no guest call; cheap).
func (c *Cluster) Stats() (Stats, error) {
	var out C.cdplace_stats_t
	err := take(C.cdplace_cluster_stats(c.ptr, &out))
	runtime.KeepAlive(c)
	if err != nil {
		return Stats{}, err
	}
	return Stats{JournalLength: uint64(out.journal_length), IdleInstances: uint64(out.idle_instances),
		BusyInstances: uint64(out.busy_instances), QuarantinedObjects: uint64(out.quarantined_objects),
		PolicyViolations: uint64(out.policy_violations)}, nil
}

// ApplyFacts applies a packed facts batch (Batch.Bytes) in one call: decoded whole first, so a
// malformed batch applies nothing (ErrBadCall naming the byte offset and record).
func (c *Cluster) ApplyFacts(batch []byte) error {
	return c.viewChange(func() error {
		p, n := bytesOf(batch)
		c.cross()
		err := take(C.cdplace_cluster_apply_facts(c.ptr, p, n))
		runtime.KeepAlive(batch)
		runtime.KeepAlive(c)
		return err
	}, func(r Recorder) { r.Batch(batch) })
}

// Assume counts a pod on a node at once (Reserve). A pod the view does not have: ErrUnknownPod.
func (c *Cluster) Assume(namespace, name, node string) error {
	return c.viewChange(func() error { return c.assume(namespace, name, node) },
		func(r Recorder) { r.Assume(namespace, name, node) })
}

func (c *Cluster) assume(namespace, name, node string) error {
	np, nn := str(namespace)
	p, n := str(name)
	xp, xn := str(node)
	c.cross()
	err := take(C.cdplace_cluster_assume(c.ptr, np, nn, p, n, xp, xn))
	runtime.KeepAlive(namespace)
	runtime.KeepAlive(name)
	runtime.KeepAlive(node)
	runtime.KeepAlive(c)
	return err
}

// Forget drops an assumption (Unreserve).
func (c *Cluster) Forget(namespace, name string) error {
	return c.viewChange(func() error { return c.forget(namespace, name) },
		func(r Recorder) { r.Forget(namespace, name) })
}

func (c *Cluster) forget(namespace, name string) error {
	np, nn := str(namespace)
	p, n := str(name)
	c.cross()
	err := take(C.cdplace_cluster_forget(c.ptr, np, nn, p, n))
	runtime.KeepAlive(namespace)
	runtime.KeepAlive(name)
	runtime.KeepAlive(c)
	return err
}

// PreFilter decides where the pod may go, as if overlay were applied (nil: none).
func (c *Cluster) PreFilter(namespace, name string, overlay []Overlay) (*Decision, error) {
	ov := packOverlay(overlay)
	var gen C.uint64_t
	b, err := c.decide(CallPreFilter, namespace, name, ov, func(now int64) ([]byte, error) {
		np, nn := str(namespace)
		p, n := str(name)
		op, on := bytesOf(ov)
		var out C.cdplace_bytes_t
		c.cross()
		err := take(C.cdplace_cluster_pre_filter_at(c.ptr, np, nn, p, n, op, on, C.int64_t(now), &out, &gen))
		runtime.KeepAlive(ov)
		runtime.KeepAlive(namespace)
		runtime.KeepAlive(name)
		runtime.KeepAlive(c)
		if err != nil {
			return nil, err
		}
		return takeBytes(&out), nil
	})
	if err != nil {
		return nil, err
	}
	return decoded(b, gen)
}

func decoded(b []byte, gen C.uint64_t) (*Decision, error) {
	d, err := DecodeDecision(b)
	if err != nil {
		return nil, err
	}
	d.Generation = uint64(gen)
	return d, nil
}

// Steer is plain-pod steering: where a pod without a ComputeDomain should go (gpus: it uses
// GPUs). The answer is the same for every such pod on the same view.
func (c *Cluster) Steer(gpus bool) (*Decision, error) {
	var g C.uint8_t
	if gpus {
		g = 1
	}
	var rg []byte // what the recorder keeps of the request: gpus
	if c.rec != nil {
		rg = []byte{byte(g)}
	}
	var gen C.uint64_t
	b, err := c.decide(CallSteer, "", "", rg, func(now int64) ([]byte, error) {
		var out C.cdplace_bytes_t
		c.cross()
		err := take(C.cdplace_cluster_steer_at(c.ptr, g, C.int64_t(now), &out, &gen))
		runtime.KeepAlive(c)
		if err != nil {
			return nil, err
		}
		return takeBytes(&out), nil
	})
	if err != nil {
		return nil, err
	}
	return decoded(b, gen)
}

// SwapReport is what a swap checked (cdplace_cluster_swap's report).
type SwapReport struct {
	// Generation is the new policy's generation.
	Generation uint64 `json:"generation"`
	// PendingDomains and PlacedPods were decided for by the new policy before it took over.
	PendingDomains int `json:"pendingDomains"`
	PlacedPods     int `json:"placedPods"`
	// WhatIfs is how many preemption what-ifs (PreFilter with an AddPod/RemovePod overlay) it
	// answered.
	WhatIfs int `json:"whatIfs"`
	// GonePods left the view during the self-test.
	GonePods int `json:"gonePods"`
	// Calls is how many decision calls the self-test made; the slowest took SlowestCallUs.
	Calls         int    `json:"calls"`
	SlowestCallUs uint64 `json:"slowestCallUs"`
	SlowestCall   string `json:"slowestCall"`
	// SetupUs is instantiating, configuring and feeding the view; ElapsedUs the whole swap.
	SetupUs   uint64 `json:"setupUs"`
	ElapsedUs uint64 `json:"elapsedUs"`
}

// Swap replaces the cluster's policy with rt's component after checking it on the live view
// (instantiate, configure, settings, self-test: see cdplace_cluster_swap); calls in flight finish
// on the old policy, later ones are decided by the new, and the view is kept. It takes as long as
// the self-test: call it off the scheduling goroutines. A refused component leaves the old one
// deciding and gives an error wrapping ErrRefused (RefusedCheck names the check).
func (c *Cluster) Swap(rt *Runtime) (SwapReport, error) {
	var out C.cdplace_bytes_t
	c.cross()
	err := take(C.cdplace_cluster_swap(c.ptr, rt.ptr, &out))
	runtime.KeepAlive(rt)
	runtime.KeepAlive(c)
	if err != nil {
		return SwapReport{}, err
	}
	var r SwapReport
	if err := json.Unmarshal(takeBytes(&out), &r); err != nil {
		return SwapReport{}, fmt.Errorf("cdplace: decoding the swap report: %w", err)
	}
	// The cluster holds the new component itself (rt may be collected).
	return r, nil
}

// SetShadow makes rt's component the cluster's shadow policy after the swap's checks (nil rt
// clears it): it is asked the live PreFilter questions of ComputeDomain pods again by
// ShadowStep, on the same views, and never acts (see cdplace_cluster_set_shadow). A refused one
// leaves the shadow set before, if any, and gives an error wrapping ErrRefused.
func (c *Cluster) SetShadow(rt *Runtime) (SwapReport, error) {
	var out C.cdplace_bytes_t
	var ptr *C.cdplace_runtime_t
	if rt != nil {
		ptr = rt.ptr
	}
	c.cross()
	err := take(C.cdplace_cluster_set_shadow(c.ptr, ptr, &out))
	runtime.KeepAlive(rt)
	runtime.KeepAlive(c)
	if err != nil {
		return SwapReport{}, err
	}
	var r *SwapReport
	if err := json.Unmarshal(takeBytes(&out), &r); err != nil {
		return SwapReport{}, fmt.Errorf("cdplace: decoding the shadow's check report: %w", err)
	}
	if r == nil {
		return SwapReport{}, nil
	}
	return *r, nil
}

// ShadowStep asks the shadow policy about the oldest live decision waiting for it, on that
// decision's view, and compares; false when none waited. One guest call: run it off the
// scheduling goroutines.
func (c *Cluster) ShadowStep() (bool, error) {
	var did C.uint8_t
	c.cross()
	err := take(C.cdplace_cluster_shadow_step(c.ptr, &did))
	runtime.KeepAlive(c)
	return did != 0, err
}

// Divergence is a ComputeDomain on which the shadow policy's answer differs from the live one.
type Divergence struct {
	// Domain is the ComputeDomain's UID; Pod the pod decided for, namespace/name.
	Domain string `json:"domain"`
	Pod    string `json:"pod"`
	// Outcome: would-not-place, would-place, other-clique, elsewhere or error.
	Outcome string `json:"outcome"`
	// Live and Shadow are both answers in words.
	Live   string `json:"live"`
	Shadow string `json:"shadow"`
	// Position is the journal position of the view both answered on.
	Position         uint64 `json:"position"`
	LiveGeneration   uint64 `json:"liveGeneration"`
	ShadowGeneration uint64 `json:"shadowGeneration"`
}

// ShadowReport is what the shadow did since the last ShadowTake.
type ShadowReport struct {
	Active     bool   `json:"active"`
	Generation uint64 `json:"generation"`
	// Outcomes counts the decisions compared per outcome (agree, would-not-place, would-place,
	// other-clique, elsewhere, error, skipped).
	Outcomes    map[string]uint64 `json:"outcomes"`
	Divergences []Divergence      `json:"divergences"`
	// Dropped divergences (the log was full); Queued decisions waiting now; BusyUs time in the
	// shadow's guest calls.
	Dropped uint64 `json:"dropped"`
	Queued  int    `json:"queued"`
	BusyUs  uint64 `json:"busyUs"`
}

// ShadowTake returns the shadow's counts and divergences since the last call and resets them.
func (c *Cluster) ShadowTake() (ShadowReport, error) {
	var out C.cdplace_bytes_t
	c.cross()
	err := take(C.cdplace_cluster_shadow_take(c.ptr, &out))
	runtime.KeepAlive(c)
	if err != nil {
		return ShadowReport{}, err
	}
	var r ShadowReport
	if err := json.Unmarshal(takeBytes(&out), &r); err != nil {
		return ShadowReport{}, fmt.Errorf("cdplace: decoding the shadow report: %w", err)
	}
	return r, nil
}

// RefusedCheck is the check that refused a new policy ("instantiate", "configure", "settings",
// "self-test"; "world" for a component of another WIT world, "compile" for any other load
// failure), "" when err is neither.
func RefusedCheck(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return ""
	}
	switch e.Kind {
	case ErrWorld:
		return "world"
	case ErrLoad:
		return "compile"
	case ErrRefused:
		if rest, ok := strings.CutPrefix(e.Message, "policy refused ("); ok {
			if check, _, ok := strings.Cut(rest, ")"); ok {
				return check
			}
		}
	}
	return ""
}

// PolicyGeneration is the generation of the policy deciding now: 1 for the component the cluster
// was made with, one more for each swap.
func (c *Cluster) PolicyGeneration() uint64 {
	var out C.uint64_t
	err := take(C.cdplace_cluster_policy_generation(c.ptr, &out))
	runtime.KeepAlive(c)
	if err != nil {
		return 0
	}
	return uint64(out)
}

// PreemptionPlan is the victims of one gang preemption.
type PreemptionPlan struct {
	// Clique is the clique label value the preemptor's domain gets.
	Clique string `json:"clique"`
	// Node is the node to nominate the preemptor to.
	Node string `json:"node"`
	// Pods are the "namespace/name" keys of every pod to evict, sorted.
	Pods []string `json:"pods"`
	// Domains are the UIDs of the ComputeDomains evicted whole, sorted.
	Domains []string `json:"domains"`
	// GPUs the victims use.
	GPUs uint32 `json:"gpus"`
	// Priority is the highest priority among the victims.
	Priority int32 `json:"priority"`
	// Trays of the clique the victims hold or have promised to them.
	Trays uint32 `json:"trays"`
}

// Preemption is what gang preemption decided for a pod.
type Preemption struct {
	// Domain is the UID of the pod's ComputeDomain, "" when it has none.
	Domain string `json:"domain"`
	// Plan is nil when preemption cannot help.
	Plan *PreemptionPlan `json:"plan"`
	// Reason says why preemption cannot help, or what the plan does.
	Reason string `json:"reason"`
}

// Preempt asks the policy which whole lower-priority ComputeDomains and plain GPU pods to
// evict so the pod's domain fits one clique (PostFilter). The view is not changed.
func (c *Cluster) Preempt(namespace, name string) (*Preemption, error) {
	b, err := c.decide(CallPreempt, namespace, name, nil, func(now int64) ([]byte, error) {
		np, nn := str(namespace)
		p, n := str(name)
		var out C.cdplace_bytes_t
		c.cross()
		err := take(C.cdplace_cluster_preempt_at(c.ptr, np, nn, p, n, C.int64_t(now), &out))
		runtime.KeepAlive(namespace)
		runtime.KeepAlive(name)
		runtime.KeepAlive(c)
		if err != nil {
			return nil, err
		}
		return takeBytes(&out), nil
	})
	if err != nil {
		return nil, err
	}
	var pr Preemption
	if err := json.Unmarshal(b, &pr); err != nil {
		return nil, fmt.Errorf("cdplace: decoding a preemption: %w", err)
	}
	return &pr, nil
}

// FleetClique is one clique of the fleet status.
type FleetClique struct {
	// Clique is the clique label value.
	Clique string `json:"clique"`
	// Usable trays may take ComputeDomain pods (not cordoned).
	Usable uint32 `json:"usable"`
	// Free trays a new domain could take now.
	Free uint32 `json:"free"`
	// Promised free trays are kept for domains that started there and still place pods.
	Promised uint32 `json:"promised"`
	// ReservedFor is the UID of the domain a head-of-queue reservation holds it for, "" for none.
	ReservedFor string `json:"reservedFor"`
}

// The phases of a ComputeDomain in the fleet status.
const (
	PhaseIdle     = "idle"
	PhasePending  = "pending"
	PhaseStarting = "starting"
	PhaseRunning  = "running"
)

// PendingReasons are the reasons a pending domain waits, as the header lists them.
var PendingReasons = []string{
	"no_compute_domain", "size_unknown", "settling", "no_clique_fits", "waiting_for_trays",
	"reserved_elsewhere", "holds_reservation", "victims_leaving", "placeable", "unresolvable",
}

// FleetDomain is one ComputeDomain of the fleet status.
type FleetDomain struct {
	UID string `json:"uid"`
	// Namespace and Name are "" when the ComputeDomain object does not exist.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Phase is one of the Phase constants.
	Phase string `json:"phase"`
	// Pending is why a pending domain waits (one of PendingReasons), "" otherwise.
	Pending string `json:"pending"`
	Size    uint32 `json:"size"`
	Placed  uint32 `json:"placed"`
	Needed  uint32 `json:"needed"`
	// Clique is a started domain's clique, or the best clique for a pending one.
	Clique string `json:"clique"`
	// Offer is the trays the best clique offers a pending domain now.
	Offer uint32 `json:"offer"`
	// Note is what to say on the ComputeDomain (an Event), "" for nothing; it has no clock in it.
	Note string `json:"note"`
}

// Fleet is the fleet status: facts of the policy's view for metrics and Events.
type Fleet struct {
	Cliques []FleetClique `json:"cliques"`
	Domains []FleetDomain `json:"domains"`
	// LargestPlaceable is the most trays a domain not started could take in one clique now.
	LargestPlaceable uint32 `json:"largestPlaceable"`
	// ReservedTrays is the trays head-of-queue reservations wait for.
	ReservedTrays uint32 `json:"reservedTrays"`
}

// Status asks the policy for the fleet status. It decides once per pending domain: call it at
// most about once a second, never per pod.
func (c *Cluster) Status() (*Fleet, error) {
	var out C.cdplace_bytes_t
	c.cross()
	err := take(C.cdplace_cluster_status(c.ptr, &out))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	var f Fleet
	if err := json.Unmarshal(takeBytes(&out), &f); err != nil {
		return nil, fmt.Errorf("cdplace: decoding the fleet status: %w", err)
	}
	return &f, nil
}
