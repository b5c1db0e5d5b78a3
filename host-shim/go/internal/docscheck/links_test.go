package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// anchors returns the GitHub anchors of a page's headings: lower case, punctuation other than
// '-' and '_' dropped, spaces made hyphens.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteRune('-')
			}
		}
		out[slug.String()] = true
	}
	return out
}

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
			rel, _ := filepath.Rel(repoRoot, p)
			dest := filepath.Join(filepath.Dir(p), target)
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, target)
				continue
			}
			if anchor := strings.TrimPrefix(m[2], "#"); anchor != "" && strings.HasSuffix(dest, ".md") {
				if !anchors(t, dest)[anchor] {
					t.Errorf("%s links to %s#%s, which has no such heading", rel, target, anchor)
				}
			}
		}
	}
}
