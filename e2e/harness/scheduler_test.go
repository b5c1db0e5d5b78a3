package harness

import (
	"testing"

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
