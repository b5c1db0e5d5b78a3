package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2, as
// sigs.k8s.io/krew/pkg/index defines it), for a strict decode: an unknown or misspelt field fails.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats,omitempty"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// krewBinary is CDPLACE_KREW_BIN, else target/e2e/bin/krew (`make krew`), else "".
func krewBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CDPLACE_KREW_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CDPLACE_KREW_BIN=%s: %v (run `make krew`)", p, err)
		}
		return p
	}
	p := filepath.Join(repoRoot, "target", "e2e", "bin", "krew")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TestKrewManifest checks the krew manifest `make krew-manifest` writes
// (kube-scheduler-config/krew/cdplace.yaml): it decodes strictly, names the plugin cdplace at the
// CLI's version, has every field krew requires, a linux/amd64 and linux/arm64 platform at most
// once each with an https URI, a sha256 and the kubectl-cdplace binary; each archive `make dist`
// left in target/dist has the sha256 the manifest gives. With krew (`make test-krew`), the plugin
// installs from the manifest and this machine's archive into a krew root of its own, as
// `kubectl krew install --manifest --archive` does, and the installed kubectl-cdplace runs.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "kube-scheduler-config", "krew", "cdplace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("cdplace.yaml: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "cdplace" {
		t.Errorf("cdplace.yaml is %s %s %q, want krew.googlecontainertools.github.com/v1alpha2 Plugin cdplace", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	cargo, err := os.ReadFile(filepath.Join(repoRoot, "Cargo.toml"))
	if err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`(?m)^version = "(.*)"$`).FindSubmatch(cargo)
	if version == nil || p.Spec.Version != "v"+string(version[1]) {
		t.Errorf("spec.version is %q, the CLI's (Cargo.toml) %q", p.Spec.Version, version)
	}
	if p.Spec.Homepage == "" || p.Spec.ShortDescription == "" || p.Spec.Description == "" {
		t.Errorf("homepage, shortDescription and description are required: %+v", p.Spec)
	}
	if len(p.Spec.Platforms) == 0 {
		t.Fatal("no platforms")
	}
	seen := map[string]bool{}
	for _, pl := range p.Spec.Platforms {
		platform := pl.Selector.MatchLabels["os"] + "_" + pl.Selector.MatchLabels["arch"]
		if len(pl.Selector.MatchLabels) != 2 || (platform != "linux_amd64" && platform != "linux_arm64") || seen[platform] {
			t.Errorf("platform %v: want os and arch, linux/amd64 or linux/arm64, once each", pl.Selector.MatchLabels)
		}
		seen[platform] = true
		archive := "kubectl-cdplace_" + platform + ".tar.gz"
		if !strings.HasPrefix(pl.URI, "https://") || !strings.HasSuffix(pl.URI, "/"+archive) {
			t.Errorf("%s: uri %q, want https://.../%s", platform, pl.URI, archive)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pl.Sha256) {
			t.Errorf("%s: sha256 %q is not a sha256", platform, pl.Sha256)
		}
		if pl.Bin != "kubectl-cdplace" || len(pl.Files) != 1 || pl.Files[0].From != "kubectl-cdplace" || pl.Files[0].To != "." {
			t.Errorf("%s: bin %q, files %+v; want kubectl-cdplace, copied from the archive's kubectl-cdplace", platform, pl.Bin, pl.Files)
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, "target", "dist", archive))
		if os.IsNotExist(err) {
			t.Logf("%s: no target/dist/%s (`make dist`): its sha256 is not checked", platform, archive)
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != pl.Sha256 {
			t.Errorf("%s: the manifest's sha256 %s is not target/dist/%s's %x: run `make krew-manifest`", platform, pl.Sha256, archive, sum)
		}
	}
	if !seen["linux_amd64"] {
		t.Error("no linux/amd64 platform")
	}

	krew := krewBinary(t)
	if krew == "" {
		t.Skip("no krew (`make krew`, or `make test-krew`): the manifest is not installed")
	}
	archive := filepath.Join(repoRoot, "target", "dist", "kubectl-cdplace_linux_amd64.tar.gz")
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("%v: run `make dist`", err)
	}
	root := t.TempDir()
	cmd := exec.Command(krew, "install", "--manifest="+filepath.Join(repoRoot, "kube-scheduler-config", "krew", "cdplace.yaml"), "--archive="+archive)
	cmd.Env = append(os.Environ(), "KREW_ROOT="+root, "HOME="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("krew install: %v\n%s", err, out)
	}
	t.Logf("krew install:\n%s", out)
	installed := filepath.Join(root, "bin", "kubectl-cdplace")
	got, err := exec.Command(installed, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", installed, err)
	}
	if want := "cdplace " + strings.TrimPrefix(p.Spec.Version, "v") + "\n"; string(got) != want {
		t.Errorf("the installed plugin says %q, want %q", got, want)
	}
	// krew checks the archive against the manifest's sha256: a manifest with another refuses it.
	var amd64 string
	for _, pl := range p.Spec.Platforms {
		if pl.Selector.MatchLabels["os"] == "linux" && pl.Selector.MatchLabels["arch"] == "amd64" {
			amd64 = pl.Sha256
		}
	}
	bad := strings.Replace(string(raw), amd64, strings.Repeat("ab", 32), 1)
	badPath := filepath.Join(root, "bad.yaml")
	if err := os.WriteFile(badPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(krew, "install", "--manifest="+badPath, "--archive="+archive)
	cmd.Env = append(os.Environ(), "KREW_ROOT="+t.TempDir(), "HOME="+root)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "checksum") {
		t.Errorf("krew installed the archive under a wrong sha256 (err %v):\n%s", err, out)
	}
}
