package cdplace

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// The Makefile stamps every binary and test that links libcdplace_host.a with the archive's hash
// (HostLibrary), so that Go's caches, which do not read the archive, relink and re-run after a
// change to the Rust library alone. The stamp must be the hash of the archive this test linked:
// the one the cgo flags name, as it is now. Skipped when built without the Makefile.
func TestHostLibraryStampIsTheLinkedArchive(t *testing.T) {
	if HostLibrary == "" {
		t.Skip("built without the Makefile's -ldflags (no stamp)")
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "target", "release", "libcdplace_host.a"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:])[:16]; HostLibrary != want {
		t.Fatalf("stamped with %s, the archive is %s: the stamp names another build", HostLibrary, want)
	}
}
