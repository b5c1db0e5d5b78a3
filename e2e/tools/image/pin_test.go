package main

import (
	"os"
	"strings"
	"testing"
)

const values = `# top comment
nameOverride: ""
image:
  repository: example.com/old
  # Preferred: the digest.
  digest: ""
  tag: ""
  pullPolicy: IfNotPresent

metrics:
  digest: "keep me"
  repository: keep/me
`

func TestSetImagePinChangesOnlyTheImageBlock(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	got, err := setImagePin([]byte(values), "ghcr.io/cdplace/kube-scheduler", digest)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(values, "  repository: example.com/old", "  repository: ghcr.io/cdplace/kube-scheduler", 1),
		`  digest: ""`, `  digest: "`+digest+`"`, 1)
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := setImagePin([]byte(values), "r", "latest"); err == nil || !strings.Contains(err.Error(), "not sha256:<64 hex>") {
		t.Errorf("a digest that is not sha256:<64 hex>: got %v", err)
	}
	if _, err := setImagePin([]byte("image:\n  tag: x\n"), "r", digest); err == nil || !strings.Contains(err.Error(), "no image.repository and image.digest") {
		t.Errorf("values without the lines to set: got %v", err)
	}
}

// The chart's values.yaml is one the pin can edit: its image block has both lines.
func TestTheChartsValuesTakeThePin(t *testing.T) {
	raw, err := os.ReadFile("../../../kube-scheduler-config/chart/cdplace-scheduler/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setImagePin(raw, "ghcr.io/cdplace/kube-scheduler", "sha256:"+strings.Repeat("0", 64)); err != nil {
		t.Fatal(err)
	}
}

func TestCompareLocksNamesEveryDifference(t *testing.T) {
	a := Lock{Repository: "r", Version: "v1", Revision: "c1", Index: "sha256:1",
		Manifests: map[string]string{"linux/amd64": "sha256:a", "linux/arm64": "sha256:b"}}
	if d := compareLocks(a, a); d != "" {
		t.Fatalf("equal locks differ: %s", d)
	}
	b := a
	b.Index, b.Manifests = "sha256:2", map[string]string{"linux/amd64": "sha256:a"}
	d := compareLocks(a, b)
	for _, want := range []string{`index: locked "sha256:1", built "sha256:2"`, `linux/arm64: locked "sha256:b", built ""`} {
		if !strings.Contains(d, want) {
			t.Errorf("diff %q lacks %q", d, want)
		}
	}
}
