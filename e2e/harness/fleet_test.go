package harness

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A controller that writes a new node before its status is set makes the first status write
// conflict; the node is read again and comes up Ready all the same (bench-e2e-smoke failed once
// on this when a repaired tray was recreated).
func TestANodeComesUpReadyAfterAStatusConflict(t *testing.T) {
	c := fake.NewClientset()
	conflicts := 0
	c.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "t-00", nil)
	})
	spec := FleetSpec{Name: "t", Racks: 1, CliquesPerRack: 1, TraysPerClique: 1, GPUsPerTray: 4}
	if err := createNode(context.Background(), c, spec, "t-00", "uuid.1"); err != nil {
		t.Fatalf("createNode after one conflict: %v", err)
	}
	n, err := c.CoreV1().Nodes().Get(context.Background(), "t-00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if conflicts != 1 || len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != corev1.NodeReady || n.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("after %d conflicts the node's conditions are %+v; want Ready", conflicts, n.Status.Conditions)
	}
}
