package owners

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ownerVectors are host-shim/testdata/owner-sizes.json, which the CLI's copy of these rules
// (host-shim/cli/src/owners.rs) runs too: the scheduler and `cdplace explain` give one size.
type ownerVectors struct {
	Sizes []struct {
		Name   string          `json:"name"`
		Object json.RawMessage `json:"object"`
		Key    string          `json:"key"`
		Size   uint32          `json:"size"`
		Source string          `json:"source"`
		Error  bool            `json:"error"`
	} `json:"sizes"`
	Keys []struct {
		Name   string   `json:"name"`
		Pod    v1.Pod   `json:"pod"`
		Served []string `json:"served"`
		Key    string   `json:"key"`
	} `json:"keys"`
}

func loadVectors(t *testing.T) ownerVectors {
	t.Helper()
	raw, err := os.ReadFile("../../../testdata/owner-sizes.json")
	if err != nil {
		t.Fatal(err)
	}
	var v ownerVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("owner-sizes.json: %v", err)
	}
	if len(v.Sizes) == 0 || len(v.Keys) == 0 {
		t.Fatal("owner-sizes.json has no vectors")
	}
	return v
}

// sizeOf decodes an owner object as the plugin's informers give it (typed for the built-in
// kinds, unstructured for the custom ones) and sizes it.
func sizeOf(raw json.RawMessage) (Fact, error) {
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(raw); err != nil {
		return Fact{}, err
	}
	switch u.GetKind() {
	case KindJob:
		return typed(raw, JobSize)
	case KindStatefulSet:
		return typed(raw, StatefulSetSize)
	case KindReplicaSet:
		return typed(raw, ReplicaSetSize)
	case KindJobSet:
		return JobSetSize(&u)
	case KindLeaderWorkerSet:
		return LeaderWorkerSetSize(&u)
	}
	panic("owner-sizes.json: kind " + u.GetKind())
}

// typed decodes raw into a built-in kind's type and sizes it with size.
func typed[T any](raw json.RawMessage, size func(*T) Fact) (Fact, error) {
	var obj T
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Fact{}, err
	}
	return size(&obj), nil
}

func TestTheSharedSizeVectors(t *testing.T) {
	for _, tc := range loadVectors(t).Sizes {
		f, err := sizeOf(tc.Object)
		switch {
		case tc.Error && err == nil:
			t.Errorf("%s: %+v; want an error", tc.Name, f)
		case !tc.Error && err != nil:
			t.Errorf("%s: %v", tc.Name, err)
		case !tc.Error && (f.Key != tc.Key || f.Size != tc.Size || f.Source != tc.Source):
			t.Errorf("%s: %+v; want key %q, size %d, source %q", tc.Name, f, tc.Key, tc.Size, tc.Source)
		}
	}
}

func TestTheSharedKeyVectors(t *testing.T) {
	for _, tc := range loadVectors(t).Keys {
		served := func(kind string) bool { return slices.Contains(tc.Served, kind) }
		if got := KeyOf(&tc.Pod, served); got != tc.Key {
			t.Errorf("%s: KeyOf = %q; want %q", tc.Name, got, tc.Key)
		}
	}
}
