package computedomain

import (
	"errors"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The plugin's own metrics, on kube-scheduler's /metrics through the component-base registry
// (subsystem cdplace). Cardinality is bounded: labels take a handful of fixed values.
const metricsSubsystem = "cdplace"

// Policy calls, by the call made.
const (
	callPreFilter = "pre_filter"
	callSteer     = "steer"
	callPreempt   = "preempt"
	callApply     = "apply_facts"
	callStatus    = "status"
)

var (
	recordDropped = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "record_dropped_total",
		Help:           "Records the decision recorder (recordPath) dropped because its writer fell behind; the trace marks each gap and replay compares nothing after a lost view change.",
		StabilityLevel: metrics.ALPHA,
	})
	policyCallDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_call_duration_seconds",
		Help:           "Duration of one call into the cdplace policy component, by call (pre_filter, steer, preempt, apply_facts, status).",
		Buckets:        metrics.ExponentialBuckets(0.00005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"call"})
	policyCallErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_call_errors_total",
		Help:           "Failed calls into the cdplace policy component, by call and kind (trap, timeout, out_of_memory, busy, policy_violation, other); the instance is replaced after each guest failure.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"call", "kind"})
	decisionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "decisions_total",
		Help:           "PreFilter decisions for ComputeDomain pods, by framework code (Success, Unschedulable, UnschedulableAndUnresolvable, Error), reused ones included.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})
	steeringAnswers = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "steering_answers_total",
		Help:           "Plain-pod steering answers given in PreFilter, by whether the policy was asked (asked) or a cached answer still held (reused).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"answer"})
	scoreCycles = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "score_cycles_total",
		Help:           "Scheduling cycles that reached PreScore with a decision of the plugin, by whether the plugin scored the feasible nodes (scored) or left Score out because every one of them would get the same score (skipped).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"score"})
	gangPreemptions = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_preemptions_total",
		Help:           "Gang preemption attempts for ComputeDomain pods and PodGroups, by result (preempted, not_possible, never, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	gangPreemptionVictims = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_preemption_victim_pods_total",
		Help:           "Pods evicted by gang preemption (whole ComputeDomains and plain GPU pods).",
		StabilityLevel: metrics.ALPHA,
	})
	gangPreemptionGPUs = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_preemption_evicted_gpus_total",
		Help:           "GPUs the pods evicted by gang preemption used.",
		StabilityLevel: metrics.ALPHA,
	})

	// The fleet, from the policy's fleet status (fleet.go), refreshed at most once a second.
	domainsPending = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "domains_pending",
		Help:           "ComputeDomains that have not started, by why they wait (no_compute_domain, size_unknown, settling, no_clique_fits, waiting_for_trays, reserved_elsewhere, holds_reservation, victims_leaving, placeable, unresolvable).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	domainsStarting = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "domains_starting",
		Help:           "ComputeDomains started in a clique with not every pod placed yet.",
		StabilityLevel: metrics.ALPHA,
	})
	domainsRunning = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "domains_running",
		Help:           "ComputeDomains with every pod of their size bound or reserved.",
		StabilityLevel: metrics.ALPHA,
	})
	cliqueFreeTrays = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "clique_free_trays",
		Help:           "Trays of an NVLink clique (label value) a new ComputeDomain could take now: usable, no GPU in use, no domain holding them.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"clique"})
	largestPlaceable = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "largest_placeable_domain_trays",
		Help:           "The most trays a ComputeDomain that has not started could take in one clique now (after promises, reserveTraysPerClique, cliqueExclusive and reservations).",
		StabilityLevel: metrics.ALPHA,
	})
	reservedTrays = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reserved_trays",
		Help:           "Trays head-of-queue clique reservations wait for (the sizes of the domains they are for).",
		StabilityLevel: metrics.ALPHA,
	})
	journalLength = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "journal_length",
		Help:           "Deltas journaled for policy instances that are behind the view (bounded by length and age), after the last policy call.",
		StabilityLevel: metrics.ALPHA,
	})
	policyInstances = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_instances",
		Help:           "Live policy instances by state (idle, busy), after the last policy call; at most maxPolicyInstances in all.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"state"})
	quarantinedObjects = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "quarantined_objects_total",
		Help:           "Objects dropped from the policy's view because applying their facts trapped the guest, by kind (until their next update).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	policyViolations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_violations_total",
		Help:           "Answers of the policy the library or the plugin refused, by safety rule: PreFilter answers that allowed a node the driver's kubelet Prepare would refuse (one-domain-per-node, one-clique-per-domain, one-workload-per-node), gang preemptions naming a victim the host does not allow (victim-lower-priority, victim-on-preemptor-trays, victim-whole-domain); the pod failed closed, nothing was evicted.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	breakerOpen = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "breaker_open",
		Help:           "1 while the policy breaker is open or half-open after repeated guest failures (ComputeDomain pods rejected, plain pods not steered), else 0.",
		StabilityLevel: metrics.ALPHA,
	})
)

// The policy's swaps (policy.go).
var (
	policySwaps = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_swaps_total",
		Help:           "Policy components offered by the policy source while the scheduler runs, by result (applied, refused) and reason (passed; or the check that refused it: compile, world, instantiate, configure, settings, self-test, missing, other).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result", "reason"})
	policyInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_info",
		Help:           "The live policy component: 1 for its sha256 digest, source (embedded, file, configMap) and generation (1 at start, one more per applied swap).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"digest", "source", "generation"})
	policyReverts = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_reverts_total",
		Help:           "Live policies reverted to the generation before them because the host refused their answers (safety violations, guest failures) policyRevert.failures times within policyRevert.window.",
		StabilityLevel: metrics.ALPHA,
	})
	shadowSwaps = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "shadow_policy_swaps_total",
		Help:           "Shadow policy components offered by the shadowPolicy source, by result (applied, refused) and reason (as cdplace_policy_swaps_total).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result", "reason"})
	shadowInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "shadow_policy_info",
		Help:           "The shadow policy component: 1 for its sha256 digest, source and generation (one more per applied change); absent when none runs.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"digest", "source", "generation"})
	shadowDecisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "shadow_decisions_total",
		Help:           "Live PreFilter and gang preemption decisions of ComputeDomain pods the shadow policy was asked about on the same view, by outcome (agree, would-not-place, would-place, other-clique, elsewhere, other-victims, error, skipped).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	shadowSeconds = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "shadow_seconds_total",
		Help:           "Time spent in the shadow policy's guest calls (catching up to a decision's view and deciding), off the scheduling goroutines.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerMetrics sync.Once

// RegisterMetrics registers the plugin's metrics with kube-scheduler's registry (once; the
// factory calls it).
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(policyCallDuration, policyCallErrors, decisionsTotal, steeringAnswers, scoreCycles, gangPreemptions, gangPreemptionVictims, gangPreemptionGPUs,
			journalLength, policyInstances, quarantinedObjects, breakerOpen, policyViolations, policySwaps, policyInfo,
			shadowSwaps, shadowInfo, shadowDecisions, shadowSeconds, recordDropped)
		legacyregistry.MustRegister(policyReverts)
		legacyregistry.MustRegister(domainsPending, domainsStarting, domainsRunning, cliqueFreeTrays, largestPlaceable, reservedTrays)
	})
}

// observeCall records one policy call that started at start and returned err.
func observeCall(call string, start time.Time, err error) {
	policyCallDuration.WithLabelValues(call).Observe(time.Since(start).Seconds())
	if err != nil {
		policyCallErrors.WithLabelValues(call, errorKind(err)).Inc()
	}
}

// observeStats sets the journal and instance gauges from the cluster (one cheap C call, no
// guest call).
func observeStats(c *cdplace.Cluster) {
	s, err := c.Stats()
	if err != nil {
		return
	}
	journalLength.Set(float64(s.JournalLength))
	policyInstances.WithLabelValues("idle").Set(float64(s.IdleInstances))
	policyInstances.WithLabelValues("busy").Set(float64(s.BusyInstances))
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, cdplace.ErrTrap):
		return "trap"
	case errors.Is(err, cdplace.ErrTimeout):
		return "timeout"
	case errors.Is(err, cdplace.ErrOutOfMemory):
		return "out_of_memory"
	case errors.Is(err, cdplace.ErrBusy):
		return "busy"
	case errors.Is(err, cdplace.ErrPolicyViolation):
		return "policy_violation"
	default:
		return "other"
	}
}
