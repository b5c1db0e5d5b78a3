package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cdplace/cdplace/e2e/harness"
)

// imageConfig is the part of an OCI image config a runtime makes the container's process of.
type imageConfig struct {
	Config struct {
		Entrypoint []string `json:"Entrypoint"`
		User       string   `json:"User"`
		Env        []string `json:"Env"`
		WorkingDir string   `json:"WorkingDir"`
	} `json:"config"`
}

// TestImageSchedules runs the built image, not the binary `make scheduler` leaves: the amd64
// image's root filesystem (make image-test unpacks it from target/image/oci and sets
// CDPLACE_IMAGE_ROOTFS) under runc, read-only, as the image's user with its entrypoint and
// environment, its own loader and glibc, no capabilities; the chart's configuration file mounted
// at /etc/cdplace as the chart mounts it. It must place a 2-pod ComputeDomain whole.
func TestImageSchedules(t *testing.T) {
	rootfs := os.Getenv("CDPLACE_IMAGE_ROOTFS")
	if rootfs == "" {
		t.Skip("CDPLACE_IMAGE_ROOTFS is not set: `make image-test` builds the image, unpacks its amd64 root filesystem and runs this")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatalf("runc is required to run the image (make image-deps installs it): %v", err)
	}
	raw, err := os.ReadFile(rootfs + ".json")
	if err != nil {
		t.Fatalf("the image's config beside its root filesystem: %v", err)
	}
	var img imageConfig
	if err := json.Unmarshal(raw, &img); err != nil {
		t.Fatal(err)
	}
	uid, gid, err := parseUser(img.Config.User)
	if err != nil {
		t.Fatal(err)
	}
	if uid == 0 {
		t.Fatalf("the image runs as %q; the chart requires a non-root user", img.Config.User)
	}
	ctx := context.Background()

	// /etc/cdplace as the chart's ConfigMap gives it, readable by the image's user only: the
	// shipped configuration with a kubeconfig (the suite's scheduler ServiceAccount's token)
	// instead of the in-cluster one.
	bundle := t.TempDir()
	etc := filepath.Join(bundle, "etc-cdplace")
	if err := os.Mkdir(etc, 0o500); err != nil {
		t.Fatal(err)
	}
	token, err := env.CP.ServiceAccountToken(ctx, "cdplace-system", "computedomain-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.CP.WriteKubeconfig(filepath.Join(etc, "kubeconfig"), token); err != nil {
		t.Fatal(err)
	}
	cfg, err := harness.SchedulerConfig(filepath.Join(repoRoot, "kube-scheduler-config", "scheduler-config.yaml"), "/etc/cdplace/kubeconfig", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "scheduler-config.yaml"), cfg, 0o400); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{etc, filepath.Join(etc, "kubeconfig"), filepath.Join(etc, "scheduler-config.yaml")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, img.Config.Entrypoint...), "--config=/etc/cdplace/scheduler-config.yaml",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--v=2")
	if env.CP.FeatureGates != "" {
		args = append(args, "--feature-gates="+env.CP.FeatureGates)
	}
	// runc's default spec (namespaces, masked paths, /proc, /dev, /sys), then the image's
	// process as a runtime makes it, the host's network (the API server listens on loopback).
	out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput()
	if err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	spec := readSpec(t, filepath.Join(bundle, "config.json"))
	spec.Root = &specs.Root{Path: rootfs, Readonly: true}
	spec.Process.Terminal = false
	spec.Process.Args = args
	spec.Process.Env = img.Config.Env
	spec.Process.Cwd = img.Config.WorkingDir
	if spec.Process.Cwd == "" {
		spec.Process.Cwd = "/"
	}
	spec.Process.User = specs.User{UID: uint32(uid), GID: uint32(gid)}
	spec.Process.Capabilities = &specs.LinuxCapabilities{} // the chart drops ALL
	spec.Process.NoNewPrivileges = true
	spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/etc/cdplace", Type: "bind", Source: etc,
		Options: []string{"rbind", "ro"}})
	var namespaces []specs.LinuxNamespace
	for _, ns := range spec.Linux.Namespaces {
		if ns.Type != specs.NetworkNamespace {
			namespaces = append(namespaces, ns)
		}
	}
	spec.Linux.Namespaces = namespaces
	writeSpec(t, filepath.Join(bundle, "config.json"), spec)

	// Stop the suite's cdplace scheduler: the image's must be the one that places the domain.
	pauseScheduler(t, env.Cdplace)
	id := fmt.Sprintf("cdplace-image-%d", os.Getpid())
	proc, err := harness.StartProcess(runDir, "image-scheduler", runc, "run", "--bundle", bundle, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(10 * time.Second)
		if out, err := exec.Command(runc, "delete", "--force", id).CombinedOutput(); err != nil && !strings.Contains(string(out), "does not exist") {
			t.Errorf("runc delete %s: %v: %s", id, err, out)
		}
	})
	if err := harness.WaitHealthy(ctx, proc, "the image's scheduler", port, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	// The scheduling process is the image's binary, running as the image's user.
	pid := containerPID(t, runc, id)
	// The link names the file as the container sees it; the inode tells it is the rootfs's.
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	running, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(rootfs, img.Config.Entrypoint[0])
	if image, err := os.Stat(want); err != nil || !os.SameFile(running, image) || exe != img.Config.Entrypoint[0] {
		t.Errorf("the container runs %s; want the image's %s (%s) (%v)", exe, img.Config.Entrypoint[0], want, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("Uid:\t%d\t%d", uid, uid); !strings.Contains(string(status), want) {
		t.Errorf("the container's process is not user %d:\n%s", uid, status)
	}
	t.Logf("image scheduler: pid %d, %s, log %s", pid, exe, proc.LogPath)

	s := newScenario(t, "image", harness.Cdplace, helmFleet, harness.PrepareOptions{})
	start := time.Now()
	s.domain("train", 2, 4)
	d := s.waitFor("train's 2 pods running", 90*time.Second, all("train", 2))
	t.Logf("the image's scheduler ran the 2-pod domain %v after its Job was created: %s", time.Since(start).Round(time.Millisecond), d["train"])
	s.assertNoSplits(d)
	s.assertAllOrNothing(d)
	s.assertNoRefusals()
	if exited, err := proc.Exited(); exited {
		t.Fatalf("the image's scheduler exited (%v); log: %s", err, proc.LogPath)
	}
	log, err := os.ReadFile(proc.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Successfully bound pod to node") {
		t.Errorf("the image's scheduler log shows no binding: %s", proc.LogPath)
	}
}

// lockedImage is the image the chart names by default: repository@index digest as
// kube-scheduler-config/image.lock pins it, or before the first `make image-pin` (no lock) the
// appVersion tag.
func lockedImage(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "kube-scheduler-config", "image.lock"))
	if errors.Is(err, fs.ErrNotExist) {
		return "ghcr.io/cdplace/kube-scheduler:v0.37.0"
	}
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Repository string `json:"repository"`
		Index      string `json:"index"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil || lock.Repository == "" || lock.Index == "" {
		t.Fatalf("image.lock: %v (repository %q, index %q)", err, lock.Repository, lock.Index)
	}
	return lock.Repository + "@" + lock.Index
}

// parseUser reads an image config's numeric "uid:gid".
func parseUser(user string) (int, int, error) {
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("image user %q: want numeric uid:gid", user)
	}
	return uid, gid, nil
}

func readSpec(t *testing.T, path string) *specs.Spec {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if spec.Process == nil || spec.Linux == nil {
		t.Fatalf("%s: runc's default spec has no process or linux section", path)
	}
	return &spec
}

func writeSpec(t *testing.T, path string, spec *specs.Spec) {
	t.Helper()
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// containerPID is the container's init process (the entrypoint) as runc reports it.
func containerPID(t *testing.T, runc, id string) int {
	t.Helper()
	out, err := exec.Command(runc, "state", id).Output()
	if err != nil {
		t.Fatalf("runc state %s: %v", id, err)
	}
	var st struct {
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid == 0 {
		t.Fatalf("runc state %s: %v: %s", id, err, out)
	}
	return st.Pid
}
