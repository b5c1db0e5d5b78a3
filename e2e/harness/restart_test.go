package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The kubelet's CrashLoopBackOff: 10 s after the first exit, doubling to 5 min, and 10 s again
// after a run of 10 min.
func TestKubeletBackOff(t *testing.T) {
	b := KubeletBackOff
	var got []time.Duration
	last := time.Duration(0)
	for range 8 {
		last = b.next(last, time.Second)
		got = append(got, last)
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if w := b.next(5*time.Minute, 10*time.Minute-time.Second); w != 5*time.Minute {
		t.Errorf("after a run of 9m59s: %v, want 5m", w)
	}
	if w := b.next(5*time.Minute, 10*time.Minute); w != 10*time.Second {
		t.Errorf("after a run of 10m: %v, want 10s (reset)", w)
	}
}

// A process that keeps exiting is started again after each wait, the wait doubling; each exit
// and restart is told, with the exit status and when the restart comes.
func TestRestarterRestartsAnExitedProcessWithBackOff(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess(dir, "crasher", "/bin/sh", "-c", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{procs: []*Process{p}}
	var said []string
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	r := NewRestarter(&Env{CP: cp}, CrashLoopBackOff{Initial: 10 * time.Second, Max: 30 * time.Second, Reset: time.Hour},
		func(format string, a ...any) { said = append(said, fmt.Sprintf(format, a...)) })
	r.now = func() time.Time { return now }
	ctx := context.Background()
	waitExit := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for exited, _ := cp.procs[0].Exited(); !exited; exited, _ = cp.procs[0].Exited() {
			if time.Now().After(deadline) {
				t.Fatal("the crasher did not exit")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	check := func(step string, want ...string) {
		t.Helper()
		said = nil
		r.Check(ctx)
		if len(said) != len(want) {
			t.Fatalf("%s: said %q, want %d lines like %q", step, said, len(want), want)
		}
		for i := range want {
			if !strings.HasPrefix(said[i], want[i]) {
				t.Errorf("%s: line %d %q, want it to start %q", step, i, said[i], want[i])
			}
		}
	}
	procs := map[*Process]bool{p: true}
	for i, wait := range []string{"10s", "20s", "30s", "30s"} {
		waitExit()
		check(fmt.Sprintf("exit %d", i+1), fmt.Sprintf("crasher exited (exit status 3) after running 0s; restart %d in %s, at ", i+1, wait))
		check("waiting") // nothing new while it waits
		d, _ := time.ParseDuration(wait)
		now = now.Add(d - time.Second)
		check("a second early")
		if !procs[cp.procs[0]] || len(procs) != i+1 {
			t.Fatalf("exit %d: started again before its wait", i+1)
		}
		now = now.Add(time.Second)
		check("due", fmt.Sprintf("crasher is running again (restart %d)", i+1))
		if procs[cp.procs[0]] {
			t.Fatalf("exit %d: not started again when due", i+1)
		}
		procs[cp.procs[0]] = true
	}
}
