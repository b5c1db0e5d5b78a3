package main

import (
	"archive/tar"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// runRootfs unpacks one platform's image from the OCI layout into a directory: the root
// filesystem a container runtime would give the entrypoint, for the checks that run the image's
// own loader, libraries and binary (make image-check, make image-test); its config goes to
// <dir>.json.
func runRootfs(args []string) error {
	fl := flag.NewFlagSet("rootfs", flag.ExitOnError)
	ociDir := fl.String("oci", "target/image/oci", "the OCI layout `make image` wrote")
	plat := fl.String("platform", "linux/amd64", "which image of the index")
	out := fl.String("out", "", "the directory to unpack into (emptied first)")
	_ = fl.Parse(args)
	if *out == "" {
		return errors.New("-out is required")
	}
	img, err := platformImage(*ociDir, *plat)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	if err := unpack(mutate.Extract(img), *out); err != nil {
		return err
	}
	// The image's config beside it: what a runtime makes the container's process of (entrypoint,
	// user, environment, working directory).
	raw, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out+".json", raw, 0o644); err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	fmt.Printf("%s unpacked in %s (config %s.json); entrypoint %v, user %s\n", *plat, *out, *out, cf.Config.Entrypoint, cf.Config.User)
	return nil
}

// platformImage finds os/arch in the layout's one image index.
func platformImage(ociDir, plat string) (v1.Image, error) {
	want, err := v1.ParsePlatform(plat)
	if err != nil {
		return nil, err
	}
	lp, err := layout.FromPath(ociDir)
	if err != nil {
		return nil, err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s: want one image index in index.json, found %d entries", ociDir, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("%s: the index has no %s image", ociDir, plat)
}

// unpack writes a flattened image filesystem (mutate.Extract) under dir.
func unpack(rc io.ReadCloser, dir string) error {
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(hdr.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("unsafe path %q in the image", hdr.Name)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(hdr.Mode & 0o777)
		if hdr.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, mode); err != nil {
				return err
			}
			if err := os.Chmod(dst, mode); err != nil { // MkdirAll applies the umask
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, dst); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unsupported entry type %q", hdr.Name, hdr.Typeflag)
		}
		if err := os.Lchown(dst, hdr.Uid, hdr.Gid); err != nil && !errors.Is(err, os.ErrPermission) {
			return err
		}
	}
}
