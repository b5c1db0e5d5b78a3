package computedomain

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// recordArgs are the recorder's plugin args (issue 37). The policy validates them with every
// other field (guest/policy/src/args.rs: recordPath non-empty, recordMaxBytes 1 MiB..64 GiB,
// recordMaxFiles 1..10000, its defaults); the host reads them here from the validated args.
type recordArgs struct {
	RecordPath     *string `json:"recordPath"`
	RecordMaxBytes uint64  `json:"recordMaxBytes"`
	RecordMaxFiles int     `json:"recordMaxFiles"`
}

// startRecorder attaches a trace recorder (internal/cdplace/record.go) to the cluster when
// recordPath is set, before any fact reaches it, and closes it (flushing what is queued) when
// ctx ends. args are the policy's args the cluster was made with (without the host's policy
// source), wasm the component it was made on. Off (nil, nil) without recordPath.
func startRecorder(ctx context.Context, logger klog.Logger, cluster *cdplace.Cluster, args, wasm []byte) (*cdplace.TraceRecorder, error) {
	var ra recordArgs
	if err := json.Unmarshal(args, &ra); err != nil {
		return nil, fmt.Errorf("%s: %w", argsPath, err)
	}
	if ra.RecordPath == nil {
		return nil, nil
	}
	rec, err := cdplace.NewTraceRecorder(cdplace.TraceOptions{
		Dir: *ra.RecordPath, MaxBytes: ra.RecordMaxBytes, MaxFiles: ra.RecordMaxFiles,
		PolicyDigest: digestOf(wasm), Args: json.RawMessage(args),
		OnDrop: recordDropped.Inc,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", argsPath.Child("recordPath"), err)
	}
	cluster.SetRecorder(rec)
	logger.Info("ComputeDomainPlacement: recording the policy's inputs and decisions", "recordPath", *ra.RecordPath,
		"recordMaxBytes", ra.RecordMaxBytes, "recordMaxFiles", ra.RecordMaxFiles)
	go func() {
		<-ctx.Done()
		if err := rec.Close(); err != nil {
			logger.Error(err, "ComputeDomainPlacement: closing the recorder")
		}
	}()
	return rec, nil
}
