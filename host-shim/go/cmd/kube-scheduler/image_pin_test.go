package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	sigyaml "sigs.k8s.io/yaml"
)

// The chart runs the image `make image` built and pinned: values.yaml's image.repository and
// image.digest are kube-scheduler-config/image.lock's, the one owner (written by make image-pin,
// checked against a fresh build by make image).
// Before the first `make image-pin` there is no lock and the chart names no digest (it falls back
// to the appVersion tag): nothing to compare, but a digest without a lock is an error.
func TestChartPinsTheLockedImage(t *testing.T) {
	values := chartImage(t)
	raw, err := os.ReadFile(filepath.Join(configDir, "image.lock"))
	if errors.Is(err, fs.ErrNotExist) {
		if values.Digest != "" {
			t.Fatalf("values.yaml pins %s but there is no image.lock: run make image-pin", values.Digest)
		}
		t.Skip("no image.lock yet and no digest in values.yaml: nothing pinned (make image-pin)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Repository string            `json:"repository"`
		Index      string            `json:"index"`
		Manifests  map[string]string `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		t.Fatalf("image.lock: %v", err)
	}
	digest := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	if !digest.MatchString(lock.Index) {
		t.Fatalf("image.lock index %q is not sha256:<64 hex>", lock.Index)
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		if !digest.MatchString(lock.Manifests[p]) {
			t.Errorf("image.lock has no %s manifest digest (%q)", p, lock.Manifests[p])
		}
	}
	if values.Repository != lock.Repository || values.Digest != lock.Index {
		t.Errorf("values.yaml image %s@%s; image.lock pins %s@%s (run make image-pin)",
			values.Repository, values.Digest, lock.Repository, lock.Index)
	}
}

type chartImageValues struct {
	Repository string `json:"repository"`
	Digest     string `json:"digest"`
}

// chartImage is the chart's values.yaml image block.
func chartImage(t *testing.T) chartImageValues {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(configDir, "chart", "cdplace-scheduler", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Image chartImageValues `json:"image"`
	}
	if err := sigyaml.Unmarshal(raw, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	return values.Image
}
