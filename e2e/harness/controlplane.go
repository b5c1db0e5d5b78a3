// Package harness runs a real Kubernetes control plane as local processes (etcd, kube-apiserver,
// kube-controller-manager and kube-schedulers built from the pinned Go modules), and fakes only
// the hardware: NVL72 nodes and their ResourceSlices (fleet.go), the NVIDIA DRA driver's
// controller (driver.go) and its kubelet plugin's Prepare/Unprepare (prepare.go).
package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Binaries are the executables a control plane needs. Resolve fills them from the environment
// (CDPLACE_E2E_BIN_DIR, CDPLACE_SCHEDULER_BIN) or the repository's target/ directory.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler string
}

// ResolveBinaries finds the binaries `make e2e-binaries` builds, relative to repoRoot.
func ResolveBinaries(repoRoot string) (Binaries, error) {
	binDir := os.Getenv("CDPLACE_E2E_BIN_DIR")
	if binDir == "" {
		binDir = filepath.Join(repoRoot, "target", "e2e", "bin")
	}
	sched := os.Getenv("CDPLACE_SCHEDULER_BIN")
	if sched == "" {
		sched = filepath.Join(repoRoot, "target", "go", "kube-scheduler")
	}
	b := Binaries{
		Etcd:              filepath.Join(binDir, "etcd"),
		APIServer:         filepath.Join(binDir, "kube-apiserver"),
		ControllerManager: filepath.Join(binDir, "kube-controller-manager"),
		Scheduler:         sched,
	}
	var missing []string
	for _, p := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("missing binaries %v: run `make e2e-binaries` first", missing)
	}
	return b, nil
}

// ControlPlane is one running control plane. Everything it writes (certificates, etcd data,
// kubeconfigs, one log per process) lives under Dir.
type ControlPlane struct {
	Dir             string
	URL             string
	Bin             Binaries
	Config          *rest.Config
	Client          kubernetes.Interface
	Dynamic         dynamic.Interface
	AdminKubeconfig string

	// FeatureGates is the --feature-gates value every component of this control plane runs
	// with ("" for the release defaults); StartScheduler passes it on.
	FeatureGates string

	pki        *pki
	etcdURL    string
	procs      []*Process
	schedulers []*Scheduler
}

// Options chooses how a control plane is configured.
type Options struct {
	// WorkloadGates turns on the 1.37 workload gates (WorkloadFeatureGates) on the API server,
	// the controller manager and the schedulers, and serves scheduling.k8s.io/v1beta1 (Workload,
	// PodGroup), which 1.37 does not by default.
	WorkloadGates bool
	// APIServerArgs are added to kube-apiserver's flags (e.g. --watch-cache=false).
	APIServerArgs []string
}

// WorkloadFeatureGates are the gates of the Workload API and workload-aware scheduling in
// Kubernetes 1.37 (k8s.io/kubernetes pkg/features): GenericWorkload (beta, off) serves Workload
// and PodGroup and adds pod spec.schedulingGroup, for the API server, the controller manager
// (resourceclaim and podgroup-protection controllers) and the scheduler (gang scheduling);
// TopologyAwareWorkloadScheduling (alpha, off) lets the scheduler place a whole PodGroup at once
// and the API server accept the PodGroup's scheduling constraints; DRAWorkloadResourceClaims
// (beta, off) lets a PodGroup share ResourceClaims, in the API server, the resourceclaim
// controller and the scheduler's DynamicResources plugin.
const WorkloadFeatureGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,DRAWorkloadResourceClaims=true"

// controllers are the kube-controller-manager controllers a user expects of a cluster: claims
// from templates, Jobs, StatefulSets, ReplicaSets and Deployments creating pods, the garbage
// collector (a generated claim goes with its pod, pods with their Job) and the namespace
// controller (namespace deletion finishes).
var controllers = []string{
	"resourceclaim-controller", "job-controller", "statefulset-controller", "replicaset-controller",
	"deployment-controller", "garbage-collector-controller", "namespace-controller",
}

// Start brings up etcd, kube-apiserver and kube-controller-manager (the controllers above) on
// loopback with the release's default feature gates and waits until the API server is ready.
func Start(ctx context.Context, dir string, bin Binaries) (*ControlPlane, error) {
	return StartWith(ctx, dir, bin, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, dir string, bin Binaries, opts Options) (*ControlPlane, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, Bin: bin}
	var gateArgs []string
	kcmControllers := controllers
	if opts.WorkloadGates {
		cp.FeatureGates = WorkloadFeatureGates
		gateArgs = []string{"--feature-gates=" + WorkloadFeatureGates}
		// Removes a PodGroup's finalizer once no pod refers to it (GenericWorkload only).
		kcmControllers = append(append([]string(nil), controllers...), "podgroup-protection-controller")
	}
	ok := false
	defer func() {
		if !ok {
			cp.Stop()
		}
	}()
	var err error
	if cp.pki, err = newPKI(dir); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}

	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return nil, err
		}
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	cp.etcdURL = etcdURL
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	etcd, err := StartProcess(dir, "etcd", bin.Etcd,
		"--name=e2e", "--data-dir="+filepath.Join(dir, "etcd-data"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, etcd)
	if err := waitHTTP(ctx, etcd, etcdURL+"/health", "", nil, 60*time.Second); err != nil {
		return nil, err
	}

	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + cp.pki.certPath, "--tls-private-key-file=" + cp.pki.keyPath,
		"--token-auth-file=" + cp.pki.tokensPath,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pki.saPubPath,
		"--service-account-signing-key-file=" + cp.pki.saKeyPath,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if opts.WorkloadGates {
		apiArgs = append(apiArgs, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	}
	apiArgs = append(apiArgs, opts.APIServerArgs...)
	api, err := StartProcess(dir, "kube-apiserver", bin.APIServer, append(apiArgs, gateArgs...)...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, api)
	if err := waitHTTP(ctx, api, cp.URL+"/readyz", cp.pki.adminToken, cp.pki.caPEM, 120*time.Second); err != nil {
		return nil, err
	}

	cp.Config = &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.pki.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             500,
		Burst:           1000,
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	if cp.Dynamic, err = dynamic.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	cp.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(cp.AdminKubeconfig, cp.pki.adminToken); err != nil {
		return nil, err
	}

	// Picked now, not with the others: a port is free only until it is bound.
	kcmPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	kcmArgs := []string{
		"--kubeconfig=" + cp.AdminKubeconfig,
		"--authentication-kubeconfig=" + cp.AdminKubeconfig,
		"--authorization-kubeconfig=" + cp.AdminKubeconfig,
		"--controllers=" + strings.Join(kcmControllers, ","),
		// The default 20 QPS would make claim creation, not scheduling, the limit of every
		// throughput measurement; large clusters raise it too.
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + filepath.Join(dir, "kcm-certs"),
	}
	kcm, err := StartProcess(dir, "kube-controller-manager", bin.ControllerManager, append(kcmArgs, gateArgs...)...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, kcm)
	ok = true
	return cp, nil
}

// WriteKubeconfig writes a kubeconfig for this API server authenticating with token.
func (cp *ControlPlane) WriteKubeconfig(path, token string) error {
	return cp.writeKubeconfig(path, cp.URL, token)
}

func (cp *ControlPlane) writeKubeconfig(path, server, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

// ServiceAccountToken asks the API server (TokenRequest) for a token of namespace/name.
func (cp *ControlPlane) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	exp := int64(24 * 3600)
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// Check returns an error naming every control-plane process that has exited.
func (cp *ControlPlane) Check() error {
	var errs []error
	for _, p := range cp.procs {
		if err := p.ExitError(""); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RestartComponent takes one control-plane process down and brings it back with the same
// arguments, data and ports: name is "etcd", "kube-apiserver" or "kube-controller-manager";
// kill sends SIGKILL (a crash), otherwise SIGTERM (a rolling restart); the process stays down
// for down, then RestartComponent waits until it is healthy again. It returns when the
// component was back (healthy), which is when the fault ended.
func (cp *ControlPlane) RestartComponent(ctx context.Context, name string, kill bool, down time.Duration) (time.Time, error) {
	i := -1
	for j, p := range cp.procs {
		if p.Name == name {
			i = j
		}
	}
	if i < 0 {
		return time.Time{}, fmt.Errorf("no control-plane process named %q", name)
	}
	old := cp.procs[i]
	if kill {
		old.Kill()
	} else {
		old.Stop(30 * time.Second)
	}
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(down):
	}
	err := cp.startAgain(ctx, i)
	return time.Now(), err
}

// startAgain starts the exited process cp.procs[i] again with the same arguments and waits until
// it is healthy (etcd, kube-apiserver) or started (kube-controller-manager).
func (cp *ControlPlane) startAgain(ctx context.Context, i int) error {
	p, err := cp.procs[i].Again()
	if err != nil {
		return err
	}
	cp.procs[i] = p
	switch p.Name {
	case "etcd":
		err = waitHTTP(ctx, p, cp.etcdURL+"/health", "", nil, 60*time.Second)
	case "kube-apiserver":
		err = waitHTTP(ctx, p, cp.URL+"/readyz", cp.pki.adminToken, cp.pki.caPEM, 120*time.Second)
	}
	return err
}

// Stop ends every process, the schedulers first, then the newest first.
func (cp *ControlPlane) Stop() {
	for _, s := range cp.schedulers {
		if s.proc != nil {
			s.Stop()
		}
	}
	cp.schedulers = nil
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].Stop(10 * time.Second)
	}
	cp.procs = nil
}

// Logs lists the log files of this control plane.
func (cp *ControlPlane) Logs() []string {
	matches, _ := filepath.Glob(filepath.Join(cp.Dir, "*.log"))
	return matches
}

func waitHTTP(ctx context.Context, p *Process, url, token string, caPEM []byte, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	if caPEM != nil {
		client.Transport = caTransport(caPEM)
	}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if err := p.ExitError(" while starting"); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %v at %s (last: %s); log: %s", p.Name, timeout, url,
		strings.TrimSpace(last), p.LogPath)
}
