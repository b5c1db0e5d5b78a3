package computedomain

import (
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
)

// Every rejection goes through rejected: at V(5) the log names the subject, the status and the
// reason; below V(5) it logs nothing; the status comes back as it went in.
func TestRejectedLogsTheSubjectAndReasonAtV5(t *testing.T) {
	for _, level := range []int{4, 5} {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(level), ktesting.BufferLogs(true)))
		buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
		reason := "no NVLink clique has 8 free trays"
		st := unschedulable(logger, fwk.UnschedulableAndUnresolvable, reason, "pod", klog.KRef("team-a", "trainer-0"))
		if st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != reason {
			t.Fatalf("V(%d): status %v %q; want UnschedulableAndUnresolvable %q", level, st.Code(), st.Message(), reason)
		}
		if got := rejected(logger, nil, "pod", klog.KRef("team-a", "trainer-1")); got != nil {
			t.Fatalf("V(%d): rejected(nil) = %v", level, got)
		}
		out := buf.String()
		if level < 5 {
			if out != "" {
				t.Errorf("V(%d) logged %q; want nothing below V(5)", level, out)
			}
			continue
		}
		for _, want := range []string{"ComputeDomainPlacement rejected", `pod="team-a/trainer-0"`, `status="UnschedulableAndUnresolvable"`, `reason="` + reason + `"`} {
			if !strings.Contains(out, want) {
				t.Errorf("V(5) logged %q; want it to contain %s", out, want)
			}
		}
		if strings.Contains(out, "trainer-1") {
			t.Errorf("V(5) logged a nil status: %q", out)
		}
	}
}
