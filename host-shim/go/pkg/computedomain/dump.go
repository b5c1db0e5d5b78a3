package computedomain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"

	"k8s.io/klog/v2"
)

// DebugDumpDirEnv names a directory: when it is set in the scheduler's environment, SIGUSR1
// makes every ComputeDomainPlacement instance of the process write the facts it has sent to the
// policy's view (the feed's last record per object) to <dir>/view-<n>.json, n counting the
// instances from 1 in the order the framework made them (one per profile that enables the
// plugin). The fault drills (e2e/drills_test.go) compare a long-running scheduler's dump with
// a freshly started one's to show the view did not drift. Unset, no signal handler is installed
// (SIGUSR1 keeps Go's default action, which ends the process).
const DebugDumpDirEnv = "CDPLACE_DEBUG_DUMP_DIR"

// dumpInstances numbers the plugin instances that write dumps.
var dumpInstances atomic.Int64

// dumpedRecord is one object of the view in a dump: the object's key and the record last
// queued for it (cdplace.h's facts record encoding, base64 in JSON).
type dumpedRecord struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Record    []byte `json:"record"`
}

// dumpView is the canonical JSON of the records the feed has queued for the view, one per
// object, sorted by kind, namespace and name: two feeds that saw the same cluster write the same
// bytes.
func (f *feed) dumpView() ([]byte, error) {
	f.mu.Lock()
	f.settleClaimsLocked()
	out := make([]dumpedRecord, 0, len(f.records))
	for k, r := range f.records {
		out = append(out, dumpedRecord{Kind: k.kind.String(), Namespace: k.namespace, Name: k.name, Record: bytes.Clone(r)})
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// writeDump writes the dump to path through a temporary file in the same directory, so a
// reader sees either the previous dump or the whole new one.
func (f *feed) writeDump(path string) error {
	b, err := f.dumpView()
	if err != nil {
		return fmt.Errorf("view dump: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("view dump directory %s (%s): %w", dir, DebugDumpDirEnv, err)
	}
	tmp, err := os.CreateTemp(dir, ".view-*.json")
	if err != nil {
		return fmt.Errorf("view dump in %s (%s): %w", dir, DebugDumpDirEnv, err)
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("view dump %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("view dump %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("view dump %s: %w", path, err)
	}
	return nil
}

// startDebugDump installs the SIGUSR1 handler when DebugDumpDirEnv is set; it lives until ctx
// ends.
func startDebugDump(ctx context.Context, logger klog.Logger, f *feed) {
	dir := os.Getenv(DebugDumpDirEnv)
	if dir == "" {
		return
	}
	path := filepath.Join(dir, fmt.Sprintf("view-%d.json", dumpInstances.Add(1)))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	logger.Info("ComputeDomainPlacement: SIGUSR1 writes the view's records", "path", path)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				if err := f.writeDump(path); err != nil {
					logger.Error(err, "ComputeDomainPlacement: view dump failed")
					continue
				}
				logger.Info("ComputeDomainPlacement: wrote the view's records", "path", path)
			}
		}
	}()
}
