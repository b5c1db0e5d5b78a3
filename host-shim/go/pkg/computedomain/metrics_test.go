package computedomain

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
)

// findMetric is the first series of kube-scheduler's registry named name whose labels include
// labels.
func findMetric(t *testing.T, name string, labels map[string]string) (*dto.Metric, bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			return m, true
		}
	}
	return nil, false
}

// metricValue reads a counter (or a histogram's sample count; 0 when there is no such series).
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := findMetric(t, name, labels)
	if !ok {
		return 0
	}
	if h := m.GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return m.GetCounter().GetValue()
}

// The plugin's metrics are on the registry kube-scheduler serves and move with what it does:
// decisions by code, policy calls by call, gang preemptions with their victims and GPUs.
func TestMetricsCountDecisionsCallsAndPreemptions(t *testing.T) {
	e, pods := gangFixture(t)
	value := func(name string, labels map[string]string) float64 { return metricValue(t, name, labels) }
	snapshot := func() map[string]float64 {
		return map[string]float64{
			"unschedulable": value("cdplace_decisions_total", map[string]string{"code": "Unschedulable"}),
			"prefilter":     value("cdplace_policy_call_duration_seconds", map[string]string{"call": "pre_filter"}),
			"preempt":       value("cdplace_policy_call_duration_seconds", map[string]string{"call": "preempt"}),
			"preempted":     value("cdplace_gang_preemptions_total", map[string]string{"result": "preempted"}),
			"victims":       value("cdplace_gang_preemption_victim_pods_total", nil),
			"gpus":          value("cdplace_gang_preemption_evicted_gpus_total", nil),
		}
	}
	before := snapshot()
	wantCode(t, "high-0", e.schedule(pods["high-0"]).preFilter, fwk.Unschedulable, "")
	if _, st := e.postFilter(pods["high-0"]); !st.IsSuccess() {
		t.Fatalf("postfilter: %v", st)
	}
	got := snapshot()
	want := map[string]float64{"unschedulable": 1, "prefilter": 1, "preempt": 1, "preempted": 1, "victims": 3, "gpus": 12}
	for k, w := range want {
		if d := got[k] - before[k]; d != w {
			t.Errorf("%s moved by %v, want %v", k, d, w)
		}
	}
}

// The journal and instance gauges follow the cluster after each policy call.
func TestGaugesShowTheJournalAndTheInstances(t *testing.T) {
	e, pods := gangFixture(t)
	gauge := func(name string, labels map[string]string) (float64, bool) {
		t.Helper()
		m, ok := findMetric(t, name, labels)
		return m.GetGauge().GetValue(), ok
	}
	wantCode(t, "high-0", e.schedule(pods["high-0"]).preFilter, fwk.Unschedulable, "")
	if v, ok := gauge("cdplace_policy_instances", map[string]string{"state": "idle"}); !ok || v != 1 {
		t.Errorf("idle instances %v (present %v), want 1", v, ok)
	}
	if v, ok := gauge("cdplace_policy_instances", map[string]string{"state": "busy"}); !ok || v != 0 {
		t.Errorf("busy instances %v (present %v), want 0", v, ok)
	}
	if _, ok := gauge("cdplace_journal_length", nil); !ok {
		t.Error("cdplace_journal_length is not exported")
	}
}
