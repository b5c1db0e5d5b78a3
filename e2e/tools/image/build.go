package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts.
const (
	entrypoint = "/usr/local/bin/kube-scheduler"
	nonrootID  = 65532
	// statusDir holds one dpkg status stanza per package, as distroless images do, so that
	// vulnerability scanners (trivy, grype) see the Debian packages the base layer comes from.
	statusDir = "var/lib/dpkg/status.d"
)

// platform is one image of the index.
type platform struct {
	os, arch, variant string
	base, binary      string // the extracted Debian packages, the kube-scheduler binary
}

func (p platform) String() string { return p.os + "/" + p.arch }

// elfMachine is the machine an architecture's binary must be built for.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// parsePlatform reads os/arch=<base dir>,<binary>.
func parsePlatform(s string) (platform, error) {
	spec, files, ok := strings.Cut(s, "=")
	base, binary, ok2 := strings.Cut(files, ",")
	osName, arch, ok3 := strings.Cut(spec, "/")
	if !ok || !ok2 || !ok3 || base == "" || binary == "" {
		return platform{}, fmt.Errorf("-platform %q: want os/arch=<base rootfs dir>,<binary>", s)
	}
	if _, known := elfMachine[arch]; osName != "linux" || !known {
		return platform{}, fmt.Errorf("-platform %q: only linux/amd64 and linux/arm64 are built", s)
	}
	p := platform{os: osName, arch: arch, base: base, binary: binary}
	if arch == "arm64" {
		p.variant = "v8"
	}
	return p, nil
}

// Digests is what a build wrote, as digests.json records it (and image.lock pins).
type Digests struct {
	Index     string            `json:"index"`
	Version   string            `json:"version"`
	Revision  string            `json:"revision"`
	Created   string            `json:"created"`
	Platforms []PlatformDigests `json:"platforms"`
}

// PlatformDigests is one image of the index.
type PlatformDigests struct {
	Platform string `json:"platform"`
	Manifest string `json:"manifest"`
	// Size is what a registry stores and a node pulls: the compressed layers, the config and
	// the manifest.
	Size int64 `json:"size"`
	// Unpacked is the size of the root filesystem (the layers' uncompressed tar streams).
	Unpacked int64 `json:"unpacked"`
	// Packages are the Debian packages of the base layer, name=version.
	Packages []string `json:"packages"`
}

func runBuild(args []string) error {
	fl := flag.NewFlagSet("build", flag.ExitOnError)
	var platforms repeated
	fl.Var(&platforms, "platform", "os/arch=<base rootfs dir>,<kube-scheduler binary>, once per platform")
	epoch := fl.Int64("epoch", -1, "SOURCE_DATE_EPOCH: every time in the image (seconds since 1970)")
	version := fl.String("version", "", "the image's version (label and ref name)")
	revision := fl.String("revision", "", "the source revision (label)")
	source := fl.String("source", "https://github.com/cdplace/cdplace", "the source repository (label)")
	repository := fl.String("repository", "ghcr.io/cdplace/kube-scheduler", "the name the docker archives are tagged with (<repository>:<version>)")
	out := fl.String("out", "target/image", "directory for oci/, the .oci.tar, the per-platform .docker.tar and digests.json")
	_ = fl.Parse(args)
	if len(platforms) == 0 || *epoch < 0 || *version == "" || *revision == "" {
		return fmt.Errorf("-platform (at least one), -epoch, -version and -revision are required")
	}
	created := time.Unix(*epoch, 0).UTC()
	labels := map[string]string{
		"org.opencontainers.image.title":       "cdplace kube-scheduler",
		"org.opencontainers.image.description": "kube-scheduler with the ComputeDomainPlacement plugin (cdplace)",
		"org.opencontainers.image.source":      *source,
		"org.opencontainers.image.url":         *source,
		"org.opencontainers.image.version":     *version,
		"org.opencontainers.image.revision":    *revision,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	work := filepath.Join(*out, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	digests := Digests{Version: *version, Revision: *revision, Created: created.Format(time.RFC3339)}
	for _, s := range platforms {
		p, err := parsePlatform(s)
		if err != nil {
			return err
		}
		img, pd, err := buildImage(p, work, created, labels)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		// One platform's image as `docker load` and `kind load image-archive` take it.
		tag, err := name.NewTag(*repository + ":" + *version)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(filepath.Join(*out, "kube-scheduler-"+*version+"-"+p.os+"-"+p.arch+".docker.tar"), tag, img); err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.os, Architecture: p.arch, Variant: p.variant}}})
		digests.Platforms = append(digests.Platforms, pd)
	}
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	digests.Index = d.String()

	ociDir := filepath.Join(*out, "oci")
	if err := os.RemoveAll(ociDir); err != nil {
		return err
	}
	lp, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": *version})); err != nil {
		return err
	}
	archive := filepath.Join(*out, "kube-scheduler-"+*version+".oci.tar")
	if err := tarDir(ociDir, archive, created); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(digests, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "digests.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("index %s  (%s, %s)\n", digests.Index, ociDir, archive)
	for _, p := range digests.Platforms {
		fmt.Printf("  %-12s %s  %.1f MiB compressed, %.1f MiB unpacked\n", p.Platform, p.Manifest,
			float64(p.Size)/(1<<20), float64(p.Unpacked)/(1<<20))
	}
	return nil
}

// buildImage makes one platform's image: the base layer from the Debian packages, the binary's
// layer, and the config.
func buildImage(p platform, work string, created time.Time, labels map[string]string) (v1.Image, PlatformDigests, error) {
	pd := PlatformDigests{Platform: p.String()}
	base, pkgs, err := baseTree(p.base)
	if err != nil {
		return nil, pd, err
	}
	pd.Packages = pkgs
	bin := tree{}
	bin.file(strings.TrimPrefix(entrypoint, "/"), 0o755, nil)
	bin[strings.TrimPrefix(entrypoint, "/")].src = p.binary
	if err := checkBinary(p, base); err != nil {
		return nil, pd, err
	}

	img := empty.Image
	for _, l := range []struct {
		name, createdBy string
		t               tree
	}{
		{"base", "cdplace-image: Debian packages " + strings.Join(pkgs, " ") + ", nonroot user 65532", base},
		{"kube-scheduler", "cdplace-image: " + entrypoint, bin},
	} {
		file := filepath.Join(work, p.os+"-"+p.arch+"-"+l.name+".tar.gz")
		if err := l.t.writeTarGz(file, created); err != nil {
			return nil, pd, err
		}
		layer, err := tarball.LayerFromFile(file, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, pd, err
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: l.createdBy}}); err != nil {
			return nil, pd, err
		}
		size, err := uncompressedSize(file)
		if err != nil {
			return nil, pd, err
		}
		pd.Unpacked += size
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, pd, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.os, p.arch, p.variant
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		User:       fmt.Sprintf("%d:%d", nonrootID, nonrootID),
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir: "/",
		Labels:     labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, pd, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, pd, err
	}
	pd.Manifest = d.String()
	m, err := img.Manifest()
	if err != nil {
		return nil, pd, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return nil, pd, err
	}
	pd.Size = m.Config.Size + int64(len(raw))
	for _, l := range m.Layers {
		pd.Size += l.Size
	}
	return img, pd, nil
}

// pruned are the parts of the Debian packages kube-scheduler never reads: documentation (each
// package's copyright file stays), manual pages, translations, lintian overrides, and glibc's
// gconv modules (loaded only by iconv(3), which neither Go nor the Rust library calls; 8 MiB on
// amd64, 20 MiB on arm64).
func pruned(rel string) bool {
	parts := strings.Split(rel, "/")
	if len(parts) > 3 && strings.HasPrefix(rel, "usr/share/doc/") {
		return len(parts) > 5 || len(parts) == 5 && parts[4] != "copyright"
	}
	if len(parts) >= 4 && parts[0] == "usr" && parts[1] == "lib" && parts[3] == "gconv" {
		return true
	}
	for _, p := range []string{"usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// baseTree is the base layer: the extracted Debian packages (fetch-debs.sh), minus pruned,
// with the nonroot user and group 65532 (as distroless names them), its home, /tmp and a
// hosts-lookup order for glibc.
func baseTree(dir string) (tree, []string, error) {
	t := tree{}
	if err := t.addDir(dir, pruned); err != nil {
		return nil, nil, err
	}
	var pkgs []string
	for name, e := range t {
		if path.Dir(name) == statusDir && e.typ == tar.TypeReg {
			raw, err := os.ReadFile(e.src)
			if err != nil {
				return nil, nil, err
			}
			pkg, ver := field(raw, "Package"), field(raw, "Version")
			if pkg == "" || ver == "" {
				return nil, nil, fmt.Errorf("%s: no Package or Version field", e.src)
			}
			pkgs = append(pkgs, pkg+"="+ver)
		}
	}
	if len(pkgs) == 0 {
		return nil, nil, fmt.Errorf("%s has no %s: not a base from fetch-debs.sh", dir, statusDir)
	}
	sort.Strings(pkgs)
	t.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	t.file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"))
	t.file("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	t.dir("home/nonroot", 0o700, nonrootID, nonrootID)
	t.dir("root", 0o700, 0, 0)
	t.dir("tmp", 0o1777, 0, 0)
	return t, pkgs, nil
}

// field is the value of a dpkg control field.
func field(control []byte, name string) string {
	for _, line := range strings.Split(string(control), "\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// checkBinary is what ldd would tell on the target: the binary is for the platform's machine,
// and its program interpreter and every library it needs are in the base layer. A library the
// binary needs that no package of the lock file brings fails the build, not the pod.
func checkBinary(p platform, base tree) error {
	f, err := elf.Open(p.binary)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Machine != elfMachine[p.arch] {
		return fmt.Errorf("%s is built for %v, not %s", p.binary, f.Machine, p.arch)
	}
	var interp string
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			raw := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(raw, 0); err != nil {
				return err
			}
			interp = string(bytes.TrimRight(raw, "\x00"))
		}
	}
	if interp == "" {
		return fmt.Errorf("%s has no program interpreter: not the dynamically linked build", p.binary)
	}
	if _, ok := base.resolve(interp); !ok {
		return fmt.Errorf("the base layer lacks the program interpreter %s", interp)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[p.arch]
	for _, lib := range libs {
		found := false
		for _, dir := range []string{"lib/" + triplet, "usr/lib/" + triplet, "lib", "usr/lib"} {
			if _, ok := base.resolve(dir + "/" + lib); ok {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s needs %s, which no package of the base layer holds", p.binary, lib)
		}
	}
	return nil
}

// uncompressedSize is the length of a gzip stream's content.
func uncompressedSize(file string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, zr)
}

// tarDir writes the OCI layout directory as an uncompressed tar (an "oci-archive", as skopeo
// and podman name it), sorted, root-owned, every time epoch.
func tarDir(dir, dst string, epoch time.Time) error {
	t := tree{}
	if err := t.addDir(dir, nil); err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(f)
	for _, name := range names {
		e := t[name]
		// Modes fixed too: the layout's files get theirs from the umask.
		hdr := &tar.Header{Typeflag: e.typ, Name: name, Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}
		if e.typ == tar.TypeDir {
			hdr.Mode = 0o755
			hdr.Name += "/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(e.src)
		if err != nil {
			return err
		}
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
