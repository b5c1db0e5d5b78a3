package computedomain

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The package doc's file map names every file of the package (tests aside), and no file that
// is gone.
func TestTheFileMapNamesEveryFile(t *testing.T) {
	src, err := os.ReadFile("plugin.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src[:strings.Index(string(src), "\npackage ")])
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^//   - (.+?):`).FindAllStringSubmatch(doc, -1) {
		for _, f := range strings.Split(m[1], ", ") {
			named[f] = true
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		have[f] = true
		if !named[f] {
			t.Errorf("plugin.go's file map does not name %s", f)
		}
	}
	for f := range named {
		if !have[f] {
			t.Errorf("plugin.go's file map names %s, which is not a file of the package", f)
		}
	}
}
