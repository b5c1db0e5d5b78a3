package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeFiles makes a directory tree in the given order, every file and directory with mtime.
func writeFiles(t *testing.T, root string, order []string, files map[string]string, mtime time.Time) {
	t.Helper()
	for _, name := range order {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := files["->"+name]; ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func layerSum(t *testing.T, root string, epoch time.Time) [32]byte {
	t.Helper()
	tr := tree{}
	if err := tr.addDir(root, pruned); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "layer.tar.gz")
	if err := tr.writeTarGz(out, epoch); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// The same files give the same layer bytes whatever order they were written in and whatever
// times they carry; a different byte or a different epoch gives another layer.
func TestLayerDependsOnlyOnContentAndEpoch(t *testing.T) {
	files := map[string]string{"lib/x/libc.so.6": "elf", "etc/ld.so.conf.d/x.conf": "/lib/x",
		"usr/share/doc/libc6/copyright": "GPL", "->lib64/ld.so": "/lib/x/ld.so", "lib/x/ld.so": "loader"}
	order := []string{"lib/x/libc.so.6", "etc/ld.so.conf.d/x.conf", "usr/share/doc/libc6/copyright", "lib/x/ld.so", "lib64/ld.so"}
	reversed := []string{"lib64/ld.so", "lib/x/ld.so", "usr/share/doc/libc6/copyright", "etc/ld.so.conf.d/x.conf", "lib/x/libc.so.6"}
	epoch := time.Unix(1_700_000_000, 0)
	a, b := t.TempDir(), t.TempDir()
	writeFiles(t, a, order, files, time.Unix(1, 0))
	writeFiles(t, b, reversed, files, time.Now())
	if layerSum(t, a, epoch) != layerSum(t, b, epoch) {
		t.Fatal("the same files written in another order at other times gave another layer")
	}
	if layerSum(t, a, epoch) == layerSum(t, a, epoch.Add(time.Second)) {
		t.Fatal("another epoch gave the same layer: the entries' times are not the epoch")
	}
	if err := os.WriteFile(filepath.Join(b, "lib/x/libc.so.6"), []byte("elf!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if layerSum(t, a, epoch) == layerSum(t, b, epoch) {
		t.Fatal("different content gave the same layer")
	}
}

func TestPrunedKeepsEachPackagesCopyrightOnly(t *testing.T) {
	for rel, want := range map[string]bool{
		"usr/share/doc":                             false,
		"usr/share/doc/libc6":                       false,
		"usr/share/doc/libc6/copyright":             false,
		"usr/share/doc/libc6/changelog.gz":          true,
		"usr/share/doc/libc6/examples":              true,
		"usr/share/doc/libc6/examples/a.c":          true,
		"usr/share/man/man1":                        true,
		"usr/share/locale":                          true,
		"usr/share/lintian/overrides/libc6":         true,
		"usr/lib/x86_64-linux-gnu/libc.so.6":        false,
		"usr/share/localedata":                      false,
		"usr/lib/aarch64-linux-gnu/gconv":           true,
		"usr/lib/aarch64-linux-gnu/gconv/UTF-16.so": true,
		"usr/lib/aarch64-linux-gnu/libm.so.6":       false,
		"lib/x86_64-linux-gnu/ld-linux.so.2":        false,
		"usr/share/doc-base/something-else.txt":     false,
	} {
		if got := pruned(rel); got != want {
			t.Errorf("pruned(%q) = %v; want %v", rel, got, want)
		}
	}
}

// The interpreter check follows links as the kernel would: /lib64/ld-linux-x86-64.so.2 is an
// absolute link into /lib/x86_64-linux-gnu, and a directory on the way may be a link too.
func TestResolveFollowsLinksInsideTheImage(t *testing.T) {
	tr := tree{}
	tr.file("lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", 0o755, []byte("ld"))
	tr.symlink("lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	tr.symlink("usrlib", "lib/x86_64-linux-gnu")
	tr.file("lib/x86_64-linux-gnu/libc.so.6", 0o755, []byte("c"))
	tr.symlink("lib/x86_64-linux-gnu/libm.so.6", "missing.so")
	for name, want := range map[string]string{
		"/lib64/ld-linux-x86-64.so.2":    "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"usrlib/libc.so.6":               "lib/x86_64-linux-gnu/libc.so.6",
		"lib/x86_64-linux-gnu/libm.so.6": "",
		"lib/nothing":                    "",
	} {
		got, ok := tr.resolve(name)
		if (want == "") == ok || ok && got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
