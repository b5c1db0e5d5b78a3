package harness

import (
	"context"
	"os"
	"testing"
	"time"

	schedconfig "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

// WithClientRate sets the client's rate and leaves the rest of the configuration; qps 0 leaves
// the configuration as it is.
func TestWithClientRate(t *testing.T) {
	base := BaselineSchedulerConfig("/tmp/kubeconfig")
	if got, err := WithClientRate(base, 0, 0); err != nil || string(got) != string(base) {
		t.Fatalf("qps 0 must leave the config alone: %v\n%s", err, got)
	}
	got, err := WithClientRate(base, 5000, 4000)
	if err != nil {
		t.Fatal(err)
	}
	// Decoded strictly into kube-scheduler's own type: a misspelt field would fail here.
	var cfg schedconfig.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(got, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	cc := cfg.ClientConnection
	if cc.QPS != 5000 || cc.Burst != 4000 || cc.Kubeconfig != "/tmp/kubeconfig" {
		t.Errorf("clientConnection %+v", cc)
	}
	if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName == nil || *cfg.Profiles[0].SchedulerName != "default-scheduler" {
		t.Errorf("profiles changed: %+v", cfg.Profiles)
	}
}

// processCPUTime reads every thread's user and system time: a busy goroutine's work shows up,
// within the 10 ms ticks the kernel counts in, and never runs backwards.
func TestProcessCPUTime(t *testing.T) {
	before, err := processCPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin for 300 ms of wall time on this thread: at least that much CPU unless the machine
	// takes the core away, so ask for a third of it.
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	after, err := processCPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if used := after - before; used < 100*time.Millisecond {
		t.Errorf("spinning 300 ms counted %v of CPU (loop ran %d times)", used, x)
	}
	if _, err := processCPUTime(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

// Settle waits while a process is busy and gives up at its timeout; processes that are idle or
// gone settle after one interval.
func TestSettleWaitsWhileAProcessIsBusy(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for x := 0; ; x++ {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	waited, settled := Settle(context.Background(), []int{os.Getpid()}, 100*time.Millisecond, 0.05, 600*time.Millisecond)
	if settled || waited < 600*time.Millisecond {
		t.Errorf("a spinning process: settled %v after %v, want a timeout after 600ms", settled, waited)
	}
	waited, settled = Settle(context.Background(), []int{1 << 30}, 100*time.Millisecond, 0.05, 10*time.Second)
	if !settled || waited > 5*time.Second {
		t.Errorf("a process that is gone: settled %v after %v, want at once", settled, waited)
	}
}
