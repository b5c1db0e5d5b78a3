package cpuprofile

import (
	"strings"
	"testing"
)

// A sample falls in the first phase of Phases that any frame of its stack marks, and counts for
// the plugin in that phase when one of its frames is the plugin's.
func TestPerfSamplesAreCountedByPhase(t *testing.T) {
	const (
		score   = "4a10 k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunScorePlugins.func2+0x5c (/x/kube-scheduler)"
		cycle   = "4a20 k8s.io/kubernetes/pkg/scheduler.(*Scheduler).schedulePod+0x1d0 (/x/kube-scheduler)"
		filter  = "4a30 k8s.io/kubernetes/pkg/scheduler.(*Scheduler).findNodesThatPassFilters.func1+0x88 (/x/kube-scheduler)"
		verdict = "4a40 github.com/cdplace/cdplace/host-shim/go/pkg/computedomain.(*Plugin).nodeVerdict+0x21 (/x/kube-scheduler)"
		gc      = "4a50 runtime.gcBgMarkWorker+0x1f (/x/kube-scheduler)"
		handler = "4a60 k8s.io/client-go/tools/cache.(*processorListener).run+0x40 (/x/kube-scheduler)"
		upsert  = "4a70 github.com/cdplace/cdplace/host-shim/go/pkg/computedomain.(*feed).upsertPod+0x10 (/x/kube-scheduler)"
		leaf    = "4a80 runtime.memmove+0x10 (/x/kube-scheduler)"
	)
	phase := func(name string) int {
		for i, p := range Phases {
			if p == name {
				return i
			}
		}
		t.Fatalf("no phase %q", name)
		return -1
	}
	stacks := []struct {
		frames []string
		want   string
		plugin bool
	}{
		{[]string{leaf, verdict, score, cycle}, "Score", true},
		{[]string{leaf, score, cycle}, "Score", false},
		{[]string{leaf, filter, cycle}, "Filter", false}, // the cycle's frame is in every phase's stack
		{[]string{leaf, upsert, handler}, "Informers", true},
		{[]string{leaf, gc}, "GC", false},
		{[]string{leaf, cycle}, "Other", false},
		{nil, "Other", false},
	}
	var s PerfShare
	for _, st := range stacks {
		if got := Phases[PhaseOf(st.frames)]; got != st.want {
			t.Errorf("%s: phase %s, want %s", strings.Join(st.frames, " <- "), got, st.want)
		}
		s.Count(&PerfSample{Frames: st.frames})
	}
	if s.Samples != len(stacks) || s.PluginSamples != 2 {
		t.Fatalf("%d samples, %d of the plugin; want %d and 2", s.Samples, s.PluginSamples, len(stacks))
	}
	if s.Phase[phase("Score")] != 2 || s.PluginPhase[phase("Score")] != 1 || s.PluginPhase[phase("Informers")] != 1 ||
		s.Phase[phase("Other")] != 2 || s.PluginPhase[phase("Filter")] != 0 {
		t.Fatalf("by phase %v, the plugin's %v", s.Phase, s.PluginPhase)
	}
}
