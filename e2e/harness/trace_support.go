package harness

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Helpers for trace-driven benchmarks (e2e/cmd/cdplace-bench-placement): a tray failing and
// coming back.

// FailNode takes a tray out as a hardware failure does: its Node and its two ResourceSlices
// (<node>-gpu.nvidia.com, <node>-compute-domain.nvidia.com) are deleted. Removing the pods bound
// to it (the pod garbage collector's part) is the caller's; objects already gone are no error.
func FailNode(ctx context.Context, c kubernetes.Interface, node string) error {
	if err := c.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", node, err)
	}
	for _, drv := range []string{GPUDriver, ComputeDomainDriver} {
		name := node + "-" + drv
		if err := c.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ResourceSlice %s: %w", name, err)
		}
	}
	return nil
}

// RecreateNode brings a failed tray of f back (repaired or replaced): the Node, Ready and
// untainted, in its clique, and its two ResourceSlices, exactly as CreateFleet made them.
func RecreateNode(ctx context.Context, c kubernetes.Interface, f *Fleet, node string) error {
	clique, ok := f.CliqueOf[node]
	if !ok {
		return fmt.Errorf("node %s is not in fleet %s", node, f.Spec.Name)
	}
	return createNode(ctx, c, f.Spec, node, clique)
}
