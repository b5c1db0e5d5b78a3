package main

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// builtImage is the image `make image` wrote (CDPLACE_IMAGE_OUT=target/image, set by
// make image-check); the test is skipped without it.
func builtImage(t *testing.T) (string, v1.ImageIndex, Digests) {
	t.Helper()
	out := os.Getenv("CDPLACE_IMAGE_OUT")
	if out == "" {
		t.Skip("CDPLACE_IMAGE_OUT is not set: `make image-check` builds the image and runs this")
	}
	raw, err := os.ReadFile(filepath.Join(out, "digests.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d Digests
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	lp, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("index.json has %d entries; want the one image index", len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return out, idx, d
}

// The layout holds one OCI image index with both platforms, each image with the config the
// chart relies on (entrypoint, user 65532, the OCI labels) and OCI media types throughout, and
// digests.json tells the truth about them.
func TestBuiltImageIsTheIndexDigestsJSONNames(t *testing.T) {
	_, idx, d := builtImage(t)
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if digest.String() != d.Index {
		t.Errorf("the layout's index is %s; digests.json says %s", digest, d.Index)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s; want %s", mt, types.OCIImageIndex)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range d.Platforms {
		want[p.Platform] = p.Manifest
	}
	if len(im.Manifests) != 2 || len(want) != 2 {
		t.Fatalf("the index has %d images, digests.json %d; want linux/amd64 and linux/arm64", len(im.Manifests), len(want))
	}
	for _, desc := range im.Manifests {
		plat := desc.Platform.OS + "/" + desc.Platform.Architecture
		if want[plat] != desc.Digest.String() {
			t.Errorf("%s: index has %s, digests.json %s", plat, desc.Digest, want[plat])
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != plat {
			t.Errorf("%s: the config says %s/%s", plat, cf.OS, cf.Architecture)
		}
		if got := strings.Join(cf.Config.Entrypoint, " "); got != entrypoint || cf.Config.User != "65532:65532" {
			t.Errorf("%s: entrypoint %q user %q; want %q 65532:65532", plat, got, cf.Config.User, entrypoint)
		}
		for k, v := range map[string]string{"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.revision": d.Revision, "org.opencontainers.image.version": d.Version,
			"org.opencontainers.image.source": "https://github.com/cdplace/cdplace"} {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q; want %q", plat, k, cf.Config.Labels[k], v)
			}
		}
		if cf.Created.UTC().Format("2006-01-02T15:04:05Z") != d.Created {
			t.Errorf("%s: created %v; want the revision's time %s", plat, cf.Created, d.Created)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 2 {
			t.Errorf("%s: manifest %s, config %s, %d layers; want OCI types and 2 layers", plat, m.MediaType, m.Config.MediaType, len(m.Layers))
		}
		for _, l := range m.Layers {
			if l.MediaType != types.OCILayer {
				t.Errorf("%s: layer %s is %s", plat, l.Digest, l.MediaType)
			}
		}
	}
}

// Pushing the layout as `crane push target/image/oci <ref>` does (the layout's one index,
// remote.WriteIndex) keeps every digest: what the registry serves under the tag is the index
// the chart pins.
func TestPushingTheLayoutKeepsTheDigest(t *testing.T) {
	_, idx, d := builtImage(t)
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(u.Host + "/cdplace/kube-scheduler:" + d.Version)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != d.Index {
		t.Fatalf("the registry serves %s as %s; the build's index is %s", ref, desc.Digest, d.Index)
	}
	for _, p := range d.Platforms {
		plat, err := v1.ParsePlatform(p.Platform)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref, remote.WithPlatform(*plat))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := img.Digest(); got.String() != p.Manifest {
			t.Errorf("a %s pull resolves to %s; the build's manifest is %s", p.Platform, got, p.Manifest)
		}
	}
}
