package cpuprofile

import (
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"
)

func TestShareClassifiesStacks(t *testing.T) {
	names := map[uint64]string{
		1: "k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOne",
		2: "github.com/cdplace/cdplace/host-shim/go/internal/cdplace._Cfunc_cdplace_cluster_apply",
		3: "k8s.io/apiserver/pkg/endpoints/handlers.createHandler",
		4: "runtime.gcBgMarkWorker",
		5: "k8s.io/client-go/tools/cache.(*processorListener).run",
		6: "github.com/cdplace/cdplace/host-shim/go/pkg/computedomain.(*feed).upsert",
		7: "k8s.io/client-go/tools/cache.(*store[go.shape.*github.com/cdplace/x.T]).Add",
	}
	p := &profile{
		sampleTypes:   []string{"samples", "cpu"},
		funcNames:     names,
		locationFuncs: map[uint64][]uint64{10: {1}, 20: {2}, 30: {3}, 40: {4}, 50: {5}, 60: {6}, 70: {7}},
		samples: []sample{
			{locations: []uint64{20, 10}, values: []int64{1, 100}}, // plugin called by the scheduler
			{locations: []uint64{10}, values: []int64{1, 300}},     // scheduler alone
			{locations: []uint64{30}, values: []int64{1, 400}},     // apiserver
			{locations: []uint64{40}, values: []int64{1, 150}},     // GC: no one's
			{locations: []uint64{60, 50}, values: []int64{1, 50}},  // plugin's informer handler
			{locations: []uint64{70}, values: []int64{1, 7}},       // a type argument is not a package
		},
	}
	s, err := p.cpuShare()
	if err != nil {
		t.Fatal(err)
	}
	want := Share{TotalNs: 1007, PluginNs: 150, APIServerNs: 400, SchedulerNs: 450}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if got := s.OfScheduler(); math.Abs(got-150.0/450) > 1e-9 {
		t.Errorf("OfScheduler = %v", got)
	}
	if got := s.OfNonAPIServer(); math.Abs(got-150.0/607) > 1e-9 {
		t.Errorf("OfNonAPIServer = %v", got)
	}
	if _, err := (&profile{sampleTypes: []string{"alloc_space"}}).cpuShare(); err == nil {
		t.Error("a heap profile was accepted as a CPU profile")
	}
}

var sink float64

// burn spends d of this process's CPU time in a function of this package (github.com/cdplace/...);
// CPU time, not wall time: on a busy machine 400 ms of wall time can hold 80 ms of CPU. It
// gives up after a minute of wall time.
func burn(d time.Duration) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start, deadline := cpu(), time.Now().Add(time.Minute)
	for cpu()-start < d && time.Now().Before(deadline) {
		for i := 0; i < 1e5; i++ {
			sink += math.Sqrt(float64(i))
		}
	}
}

// TestAnalyzeARealProfile reads what runtime/pprof writes (gzip, packed and unpacked fields).
func TestAnalyzeARealProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	burn(400 * time.Millisecond)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalNs < int64(100*time.Millisecond) || s.PluginNs < s.TotalNs/2 || s.APIServerNs != 0 {
		t.Errorf("a profile of burn(): %+v, want most of >=100ms in github.com/cdplace frames, none in the apiserver", s)
	}
}
