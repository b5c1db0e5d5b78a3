package harness

import (
	"strings"
	"testing"
	"time"
)

// A control-plane process that exits is reported with its log's last lines, which is all a CI
// run's report keeps of why (the control plane's logs stay on the CI machine).
func TestCheckReportsTheLogsLastLines(t *testing.T) {
	p, err := StartProcess(t.TempDir(), "kube-controller-manager", "/bin/sh", "-c",
		`for i in 1 2 3 4 5 6 7; do echo "line $i"; done; echo "failed to listen on 127.0.0.1:40000: address already in use"; exit 1`)
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{procs: []*Process{p}}
	deadline := time.Now().Add(10 * time.Second)
	for cp.Check() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the process did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	msg := cp.Check().Error()
	for _, want := range []string{"kube-controller-manager exited (exit status 1)", "address already in use", "line 4"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Check() = %q; want it to contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "line 3") {
		t.Errorf("Check() = %q; want only the log's last 5 lines", msg)
	}
}
