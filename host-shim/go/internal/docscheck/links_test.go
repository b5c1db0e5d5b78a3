package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// markdownLink matches [text](target) with a relative target (no scheme, not a bare anchor).
var markdownLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// TestRelativeLinksInTheDocsResolve: every relative link in the README, the top-level pages and
// docs/ (the lab notebooks included) names a file or directory that exists, so moving a page
// without fixing its links fails.
func TestRelativeLinksInTheDocsResolve(t *testing.T) {
	var pages []string
	for _, g := range []string{"*.md", "docs/*.md", "docs/dev/*.md", "kube-scheduler-config/*.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, g))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d pages", len(pages))
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), target)); err != nil {
				rel, _ := filepath.Rel(repoRoot, p)
				t.Errorf("%s links to %s, which does not exist", rel, target)
			}
		}
	}
}
