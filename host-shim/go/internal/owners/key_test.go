package owners

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The owner key's form has one owner, include/cdplace.h (CDPLACE_KIND_OWNER); Key is the Go copy
// (the fact extraction's pod owners use it too) and the Rust copy,
// cdplace_host::extract::owner_key, is tested against the same line.
func TestKeyHasTheFormTheHeaderGives(t *testing.T) {
	header, err := os.ReadFile("../../../lib/include/cdplace.h")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`CDPLACE_KIND_OWNER = \d+ /\*.*name = owner key "([^"]+)"`).FindSubmatch(header)
	if m == nil {
		t.Fatal("no owner key form on CDPLACE_KIND_OWNER's line in the header")
	}
	want := strings.NewReplacer("<Kind>", "Job", "<ns>", "training", "<name>", "trainer").Replace(string(m[1]))
	if got := Key("Job", "training", "trainer"); got != want {
		t.Fatalf("Key = %q, the header's form gives %q", got, want)
	}
	kind, ns, name, ok := SplitKey(want)
	if !ok || kind != "Job" || ns != "training" || name != "trainer" {
		t.Fatalf("SplitKey(%q) = %q %q %q %v", want, kind, ns, name, ok)
	}
}
