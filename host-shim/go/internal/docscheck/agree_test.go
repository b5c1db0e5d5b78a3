package docscheck

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The install story in one place, and the docs, the chart's values and Chart.yaml saying the
// same thing (issue 46): each test below catches one kind of contradiction that had crept in.

const chartDir = repoRoot + "/kube-scheduler-config/chart/cdplace-scheduler"

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// userDocs are the Markdown files a user reads: README.md, SECURITY.md, docs/*.md (not the lab
// notebooks under docs/dev) and those under kube-scheduler-config.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{"README.md": read(t, "README.md"), "SECURITY.md": read(t, "SECURITY.md")}
	matches, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	for _, m := range matches {
		rel, _ := filepath.Rel(repoRoot, m)
		out[rel] = read(t, rel)
	}
	_ = filepath.WalkDir(filepath.Join(repoRoot, "kube-scheduler-config"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repoRoot, p)
			out[rel] = read(t, rel)
		}
		return nil
	})
	if len(out) < 10 {
		t.Fatalf("read %d docs", len(out))
	}
	return out
}

func chartValues(t *testing.T) (raw string, v map[string]any) {
	t.Helper()
	raw = read(t, "kube-scheduler-config/chart/cdplace-scheduler/values.yaml")
	if err := yaml.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	return raw, v
}

func num(t *testing.T, v map[string]any, path ...string) int {
	t.Helper()
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("values.yaml has no %s", strings.Join(path, "."))
		}
		cur = m[p]
	}
	f, ok := cur.(float64)
	if !ok {
		t.Fatalf("values.yaml %s = %v, not a number", strings.Join(path, "."), cur)
	}
	return int(f)
}

// The container's memory limit is written out as a sum in operations.md and in values.yaml's
// comment: both must be the chart's defaults, added up right.
func TestTheMemorySumsAreTheChartsDefaults(t *testing.T) {
	raw, v := chartValues(t)
	base, n, g := num(t, v, "memory", "baseMiB"), num(t, v, "plugin", "args", "maxPolicyInstances"), num(t, v, "plugin", "args", "guestMemoryLimitMiB")
	sum := regexp.MustCompile(`=\s*([\d,]+)\s*\+\s*([\d,]+)\s*×\s*([\d,]+)\s*=\s*([\d,]+)\s*MiB`)
	atoi := func(s string) int { i, _ := strconv.Atoi(strings.ReplaceAll(s, ",", "")); return i }
	for name, text := range map[string]string{"docs/operations.md": read(t, "docs/operations.md"), "values.yaml": raw} {
		found := sum.FindAllStringSubmatch(text, -1)
		if len(found) == 0 {
			t.Errorf("%s: no memory sum `= base + n × g = total MiB`", name)
		}
		for _, m := range found {
			if atoi(m[1]) != base || atoi(m[2]) != n || atoi(m[3]) != g || atoi(m[4]) != base+n*g {
				t.Errorf("%s says %s; the chart's defaults are %d + %d × %d = %d MiB", name, m[0], base, n, g, base+n*g)
			}
		}
	}
	for _, m := range regexp.MustCompile("`memory.baseMiB` \\(([\\d,]+)\\)").FindAllStringSubmatch(read(t, "docs/operations.md"), -1) {
		if atoi(m[1]) != base {
			t.Errorf("docs/operations.md says %s; values.yaml's memory.baseMiB is %d", m[0], base)
		}
	}
}

// Where guestMemoryLimitMiB must be raised is said in several places: one figure.
func TestOneFigureForWhenToRaiseTheGuestMemoryLimit(t *testing.T) {
	raw, _ := chartValues(t)
	texts := userDocs(t)
	texts["values.yaml"] = raw
	re := regexp.MustCompile(`(?i)raise it\s+past\s+(?:about\s+|~)([\d,]+)\s+trays`)
	seen := map[string][]string{}
	for name, text := range texts {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			seen[m[1]] = append(seen[m[1]], name)
		}
	}
	if len(seen) != 1 {
		t.Errorf("when to raise guestMemoryLimitMiB, by figure: %v; want one figure", seen)
	}
}

// The Kubernetes versions the docs quote from Chart.yaml are Chart.yaml's.
func TestTheDocsQuoteChartYamlsKubeVersion(t *testing.T) {
	var chart struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "kube-scheduler-config/chart/cdplace-scheduler/Chart.yaml")), &chart); err != nil || chart.KubeVersion == "" {
		t.Fatalf("Chart.yaml kubeVersion: %q (%v)", chart.KubeVersion, err)
	}
	quoted := 0
	for name, text := range userDocs(t) {
		for _, m := range regexp.MustCompile("`kubeVersion: ([^`]+)`").FindAllStringSubmatch(text, -1) {
			quoted++
			if m[1] != chart.KubeVersion {
				t.Errorf("%s quotes kubeVersion %q; Chart.yaml says %q", name, m[1], chart.KubeVersion)
			}
		}
	}
	if quoted < 2 {
		t.Errorf("install.md and compatibility.md quote the chart's kubeVersion; found %d quotes", quoted)
	}
}

// The stock scheduler's manifest is moved away by the install and back by the uninstall and the
// break-glass runbook: one path.
func TestTheStockManifestGoesBackFromWhereTheInstallPutIt(t *testing.T) {
	const manifest = "/etc/kubernetes/manifests/kube-scheduler.yaml"
	stop := regexp.MustCompile(`mv\s+` + regexp.QuoteMeta(manifest) + `\s+(\S+)`)
	restore := regexp.MustCompile(`mv\s+(\S+)\s+` + regexp.QuoteMeta(manifest))
	stops, restores := map[string][]string{}, map[string][]string{}
	for name, text := range userDocs(t) {
		for _, m := range stop.FindAllStringSubmatch(text, -1) {
			stops[m[1]] = append(stops[m[1]], name)
		}
		for _, m := range restore.FindAllStringSubmatch(text, -1) {
			restores[m[1]] = append(restores[m[1]], name)
		}
	}
	if len(stops) != 1 || len(restores) != 1 {
		t.Fatalf("the stock manifest is moved to %v and back from %v; want one path each", stops, restores)
	}
	for to := range stops {
		if _, ok := restores[to]; !ok {
			t.Errorf("the install moves the stock manifest to %s (%v), the restore takes it from %v", to, stops[to], restores)
		}
	}
	if !slices.Contains(stops[firstKey(stops)], "docs/install.md") {
		t.Errorf("docs/install.md does not stop the stock scheduler: %v", stops)
	}
}

func firstKey(m map[string][]string) string {
	for k := range m {
		return k
	}
	return ""
}

// install.md is the only place with the install steps: no other user doc has a `helm install`
// command in a shell block (README, the chart's pages and the runbooks link it).
func TestTheInstallStepsAreOnlyInInstallMd(t *testing.T) {
	block := regexp.MustCompile("(?s)```(?:sh|bash|shell)\n(.*?)```")
	for name, text := range userDocs(t) {
		for _, m := range block.FindAllStringSubmatch(text, -1) {
			if strings.Contains(m[1], "helm install ") && name != "docs/install.md" {
				t.Errorf("%s has install steps (`helm install` in a shell block); they belong in docs/install.md only:\n%s", name, m[1])
			}
		}
	}
	if !strings.Contains(read(t, "README.md"), "(docs/install.md)") {
		t.Errorf("README.md does not link docs/install.md")
	}
}

// Paths of docs that values.yaml and the chart's templates name exist (a page that moved is
// a dead pointer in every rendered comment).
func TestTheChartNamesDocsThatExist(t *testing.T) {
	re := regexp.MustCompile(`\b(docs/[\w./-]+\.md)`)
	_ = filepath.WalkDir(chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".tpl") || strings.HasSuffix(p, ".txt")) {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(repoRoot, m[1])); err != nil {
				rel, _ := filepath.Rel(repoRoot, p)
				t.Errorf("%s names %s, which does not exist", rel, m[1])
			}
		}
		return nil
	})
}

// What values.yaml says the viewer ClusterRole reads, it reads.
func TestTheViewerRoleReadsWhatValuesSays(t *testing.T) {
	raw, _ := chartValues(t)
	i := strings.Index(raw, "A ClusterRole `cdplace-viewer`")
	if i < 0 {
		t.Fatal("values.yaml no longer describes the viewer ClusterRole")
	}
	comment := raw[i : i+strings.Index(raw[i:], "viewer:")]
	viewer := read(t, "kube-scheduler-config/chart/cdplace-scheduler/templates/viewer.yaml")
	for _, r := range []string{"leases", "events", "nodes", "pods", "configmaps", "secrets"} {
		if strings.Contains(comment, r) && !strings.Contains(viewer, `"`+r+`"`) {
			t.Errorf("values.yaml says the viewer role reads %s; templates/viewer.yaml grants no such resource", r)
		}
	}
}

// The README and the workloads page say what each mode does: ComputeDomain pods name
// computedomain-scheduler in both modes (singleScheduler's default-scheduler profile is
// upstream's), and plain GPU pods of the stock profile are not steered.
func TestTheReadmeClaimsPerModeHold(t *testing.T) {
	cfg := read(t, "kube-scheduler-config/chart/cdplace-scheduler/templates/configmap.yaml")
	if strings.Count(cfg, "ComputeDomainPlacement") == 0 {
		t.Fatal("the chart's configuration has no ComputeDomainPlacement")
	}
	for _, name := range []string{"README.md", "docs/workloads.md", "kube-scheduler-config/README.md"} {
		text := read(t, name)
		if strings.Contains(text, "nothing cdplace-specific") {
			t.Errorf("%s says workloads need nothing cdplace-specific; they name schedulerName: computedomain-scheduler", name)
		}
		if !strings.Contains(strings.Join(strings.Fields(text), " "), "schedulerName: computedomain-scheduler") {
			t.Errorf("%s does not say that pods name schedulerName: computedomain-scheduler", name)
		}
	}
	readme := read(t, "README.md")
	for _, mode := range []string{"`singleScheduler`", "`secondScheduler`"} {
		if !strings.Contains(readme, mode) {
			t.Errorf("README.md does not say what %s does", mode)
		}
	}
	if regexp.MustCompile(`(?i)plain GPU pods\s+are\s+kept off`).MatchString(readme) {
		t.Errorf("README.md says plain GPU pods are kept off domains' cliques without saying which (only those of computedomain-scheduler are steered)")
	}
}

// The image: built without a container engine and not published; no doc says otherwise.
func TestTheDocsSayWhatTheImageIs(t *testing.T) {
	if !strings.Contains(read(t, "docs/install.md"), "No image has been published yet") {
		t.Skip("install.md no longer says no image is published; revisit these checks")
	}
	for name, text := range userDocs(t) {
		flat := strings.Join(strings.Fields(text), " ")
		for _, bad := range []*regexp.Regexp{
			regexp.MustCompile(`(?i)the published image`),
			regexp.MustCompile(`(?i)image needs a Docker engine|building the image needs a Docker engine`),
			regexp.MustCompile(`(?i)the image has not been built`),
		} {
			if m := bad.FindString(flat); m != "" {
				t.Errorf("%s says %q: make image builds the image without a container engine, and no image is published", name, m)
			}
		}
	}
}

// chartDigest is the sha256 of the chart's files, by path (relative to the chart) and content.
func chartDigest(t *testing.T, dir string) string {
	t.Helper()
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(filepath.ToSlash(rel) + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// A chart version names one chart: kube-scheduler-config/chart/released.lock holds the digest
// of the chart as each version was released, and the chart may differ from it only under a
// version not released yet, which the CHANGELOG's Unreleased section names.
func TestAChartVersionNamesOneChart(t *testing.T) {
	if dir := os.Getenv("CDPLACE_CHART_DIGEST_OF"); dir != "" {
		t.Logf("digest of %s: %s", dir, chartDigest(t, dir))
		return
	}
	var chart struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "kube-scheduler-config/chart/cdplace-scheduler/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	released := map[string]string{}
	for _, line := range strings.Split(read(t, "kube-scheduler-config/chart/released.lock"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			released[f[0]] = f[1]
		}
	}
	digest := chartDigest(t, chartDir)
	if want, ok := released[chart.Version]; ok && want != digest {
		t.Errorf("the chart changed since version %s was released (%s, now %s): bump Chart.yaml's version and name it in the CHANGELOG", chart.Version, want, digest)
	}
	if _, ok := released[chart.Version]; !ok {
		changelog := read(t, "CHANGELOG.md")
		unreleased := changelog[strings.Index(changelog, "## [Unreleased]"):]
		if i := strings.Index(unreleased[3:], "\n## ["); i >= 0 {
			unreleased = unreleased[:i+3]
		}
		if !strings.Contains(unreleased, "chart "+chart.Version) && !strings.Contains(unreleased, "Chart "+chart.Version) {
			t.Errorf("Chart.yaml's version %s is not released yet; the CHANGELOG's Unreleased section must name it (\"chart %s\")", chart.Version, chart.Version)
		}
	}
}
