package harness

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"
)

// PauseImage is the sandbox image the real nodes' containerd uses; WriteNodeImages provides it.
const PauseImage = "registry.k8s.io/pause:3.10"

// WriteNodeImages writes an image archive (docker save's format, which `ctr images import` and
// `kind load image-archive` read) holding one image tagged PauseImage: a single layer with the
// static binary pauseBin as /pause, its entrypoint. The real nodes pull nothing (no registry is
// reachable in CI); their pods run this image as their workload too.
func WriteNodeImages(path, pauseBin string) error {
	bin, err := os.ReadFile(pauseBin)
	if err != nil {
		return err
	}
	epoch := time.Unix(0, 0).UTC()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(bin); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	diffID := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": goarch(), "os": "linux", "created": epoch.Format(time.RFC3339),
		"config": map[string]any{"Entrypoint": []string{"/pause"}, "User": "65535:65535"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{PauseImage}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if err := w.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		if _, err := w.Write(e.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

func goarch() string { return runtime.GOARCH }
