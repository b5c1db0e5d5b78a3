package computedomain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

func decodeDump(t *testing.T, b []byte) []dumpedRecord {
	t.Helper()
	var recs []dumpedRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatalf("dump is not JSON: %v\n%s", err, b)
	}
	return recs
}

func dumpKeys(recs []dumpedRecord) []string {
	keys := make([]string, 0, len(recs))
	for _, r := range recs {
		keys = append(keys, r.Kind+"/"+r.Namespace+"/"+r.Name)
	}
	return keys
}

// Two feeds that saw the same objects in different orders dump the same bytes, sorted by kind,
// namespace and name, with one record per object of the view; a deleted pod leaves the dump.
func TestDumpViewIsCanonical(t *testing.T) {
	cd := computeDomain("cd", "uid-cd", 2)
	build := func(reverse bool) *feed {
		nodes := rack("a", 1, 2)
		list := []runtime.Object{channelTemplate("cd", "uid-cd"), boundTo(cdPod("cd", "p0"), "a-00"), boundTo(cdPod("cd", "p1"), "a-01"),
			gpuSlice("a-00-gpu", "gpu.nvidia.com", "a-00", 4), gpuSlice("a-01-gpu", "gpu.nvidia.com", "a-01", 4)}
		if reverse {
			for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
				list[i], list[j] = list[j], list[i]
			}
			nodes[0], nodes[1] = nodes[1], nodes[0]
		}
		e := newEnv(t, "", nodes, []*unstructured.Unstructured{cd.DeepCopy()}, list...)
		e.apply()
		return e.plugin.feed
	}
	a, b := build(false), build(true)
	da, err := a.dumpView()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.dumpView()
	if err != nil {
		t.Fatal(err)
	}
	if string(da) != string(db) {
		t.Fatalf("dumps of the same cluster differ:\n%s\n---\n%s", da, db)
	}
	recs := decodeDump(t, da)
	keys := dumpKeys(recs)
	if !sort.SliceIsSorted(recs, func(i, j int) bool {
		x, y := recs[i], recs[j]
		return x.Kind < y.Kind || x.Kind == y.Kind && (x.Namespace < y.Namespace || x.Namespace == y.Namespace && x.Name < y.Name)
	}) {
		t.Errorf("dump not sorted: %q", keys)
	}
	for _, want := range []string{"Node//a-00", "Node//a-01", "Pod/" + ns + "/p0", "Pod/" + ns + "/p1", "ComputeDomain/" + ns + "/cd"} {
		if !containsKey(keys, want) {
			t.Errorf("dump lacks %s: %q", want, keys)
		}
	}
	for _, r := range recs {
		k := objKey{namespace: r.Namespace, name: r.Name}
		for kind := cdplace.KindNode; kind <= cdplace.KindOwner; kind++ {
			if kind.String() == r.Kind {
				k.kind = kind
			}
		}
		if got := a.records[k]; !reflect.DeepEqual(got, r.Record) {
			t.Errorf("%s: dumped record %x; the feed's is %x", r.Kind+"/"+r.Name, r.Record, got)
		}
	}

	a.deletePod(ns, "p1", "")
	after, err := a.dumpView()
	if err != nil {
		t.Fatal(err)
	}
	if keys := dumpKeys(decodeDump(t, after)); containsKey(keys, "Pod/"+ns+"/p1") || !containsKey(keys, "Pod/"+ns+"/p0") {
		t.Errorf("after deleting p1 the dump has %q", keys)
	}
	if string(after) == string(db) {
		t.Error("the dump did not change when a pod left the view")
	}
}

func containsKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// With CDPLACE_DEBUG_DUMP_DIR set, SIGUSR1 writes the instance's dump there (and does not end
// the process); it holds the view's objects.
func TestDumpOnSIGUSR1(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DebugDumpDirEnv, dir)
	e := newEnv(t, "", rack("a", 1, 2), nil)
	e.apply()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	var b []byte
	waitFor(t, func() bool {
		matches, _ := filepath.Glob(filepath.Join(dir, "view-*.json"))
		if len(matches) != 1 {
			return false
		}
		var err error
		b, err = os.ReadFile(matches[0])
		return err == nil
	})
	want, err := e.plugin.feed.dumpView()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(want) {
		t.Fatalf("written dump:\n%s\nwant:\n%s", b, want)
	}
	if keys := dumpKeys(decodeDump(t, b)); !containsKey(keys, "Node//a-00") || !containsKey(keys, "Node//a-01") {
		t.Errorf("dump lacks the nodes: %q", keys)
	}
}
