package cdplace

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

func some[T any](v T) *T { return &v }

func newTestCluster(t *testing.T, args string) *Cluster {
	t.Helper()
	rt, err := NewRuntime(GuestWasm)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(rt, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// twoRacks is a batch: cliques u.1 (a-0..a-3) and u.2 (b-0, b-1) of 4-GPU trays, a CPU node, a
// ComputeDomain of 2 pods with its channel template, one pod bound to a-0 and one pending.
func twoRacks() *Batch {
	var b Batch
	add := func(rec []byte) { b.Add(rec) }
	for i := 0; i < 4; i++ {
		add(AppendNode(nil, &facts.Node{Name: fmt.Sprintf("a-%d", i), CliqueLabel: some("u.1"), GPUs: 4}))
	}
	for i := 0; i < 2; i++ {
		add(AppendNode(nil, &facts.Node{Name: fmt.Sprintf("b-%d", i), CliqueLabel: some("u.2"), GPUs: 4}))
	}
	add(AppendNode(nil, &facts.Node{Name: "cpu-0"}))
	add(AppendDomain(nil, &facts.Domain{Namespace: "ns", Name: "cd", UID: "uid-1", SizeHint: some(uint32(2))}))
	add(AppendTemplate(nil, &facts.Template{Namespace: "ns", Name: "cd-channel", Domain: some("uid-1")}))
	claims := []facts.PodClaim{{Name: "channel", Template: some("cd-channel")}}
	add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: "p0", NodeName: some("a-0"), Claims: claims, GPUs: 4, CreatedMs: 1}))
	add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: "p1", Claims: claims, GPUs: 4, CreatedMs: 2, Priority: -3}))
	add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: "web", Owner: some("ReplicaSet/ns/web")}))
	return &b
}

func TestFactsBatchThroughTheLibrary(t *testing.T) {
	c := newTestCluster(t, "")
	b := twoRacks()
	if err := c.ApplyFacts(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	d, err := c.PreFilter("ns", "p1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.Code != CodeSuccess || d.Domain != "uid-1" || !d.Exclusive {
		t.Fatalf("p1 should be held to its domain's clique: %+v", d)
	}
	set := slices.Sorted(slices.Values(d.NodeSet))
	if want := []string{"a-0", "a-1", "a-2", "a-3"}; !slices.Equal(set, want) {
		t.Fatalf("node set %v, want %v", set, want)
	}
	if v, _, _ := d.Node("b-0", "u.2"); v.Code != CodeUnschedulableAndUnresolvable || !strings.Contains(v.Reason, "already runs in NVLink clique") {
		t.Fatalf("b-0: %+v", v)
	}
	if v, score, scored := d.Node("a-1", "u.1"); v.Code != CodeSuccess || !scored || score <= 0 {
		t.Fatalf("a-1: %+v score %d scored %v", v, score, scored)
	}
	if d, err := c.PreFilter("ns", "web", nil); err != nil || d.Status.Code != CodeSkip {
		t.Fatalf("a pod without a domain is skipped: %+v %v", d, err)
	}

	// Preemption's overlay: as if p0 were gone, the domain has not started and p1 may go to
	// either clique.
	d, err = c.PreFilter("ns", "p1", []Overlay{{Op: OverlayRemove, Namespace: "ns", Name: "p0"}})
	if err != nil || d.Status.Code != CodeSuccess || d.Exclusive || len(d.NodeSet) != 6 {
		t.Fatalf("with p0 removed by the overlay: %+v %v", d, err)
	}
	// Removing the bound pod for real.
	var rm Batch
	rm.Add(AppendRemove(nil, KindPod, "ns", "p0"))
	if err := c.ApplyFacts(rm.Bytes()); err != nil {
		t.Fatal(err)
	}
	d, err = c.PreFilter("ns", "p1", nil)
	if err != nil || d.Status.Code != CodeSuccess || d.Exclusive || len(d.NodeSet) != 6 {
		t.Fatalf("a domain not started is offered both cliques: %+v %v", d, err)
	}
}

func TestAMalformedBatchAppliesNothing(t *testing.T) {
	c := newTestCluster(t, "")
	b := twoRacks()
	good := b.Bytes()
	if err := c.ApplyFacts(good[:len(good)-3]); !errors.Is(err, ErrBadCall) || !strings.Contains(err.Error(), "record") {
		t.Fatalf("truncated batch: %v", err)
	}
	if _, err := c.PreFilter("ns", "p1", nil); !errors.Is(err, ErrUnknownPod) {
		t.Fatalf("nothing of a malformed batch may be applied: %v", err)
	}
	var bad Batch
	bad.Add(AppendRemove(nil, KindPod, "", "p0"))
	if err := c.ApplyFacts(bad.Bytes()); !errors.Is(err, ErrBadCall) {
		t.Fatalf("a pod removal without a namespace: %v", err)
	}
}

func TestArgsAreValidatedByThePolicyAndSettingsComeBack(t *testing.T) {
	rt, err := NewRuntime(GuestWasm)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewCluster(rt, []byte(`{"wholeTrays":"Off"}`))
	if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), "unknown field `wholeTrays`") {
		t.Fatalf("unknown field: %v", err)
	}
	c, err := NewCluster(rt, []byte(`{"cliqueLabel":"example.com/clique","guestCallTimeout":"750ms","guestMemoryLimitMiB":64}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Settings()
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Keys: facts.DefaultKeys, CallTimeoutMs: 750, MemoryLimitMiB: 64, PlainPodSteering: true, MaxPolicyInstances: 16}
	want.CliqueLabel = "example.com/clique"
	if s != want {
		t.Fatalf("settings %+v, want %+v", s, want)
	}
	c, err = NewCluster(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.Settings(); err != nil || s.Keys != facts.DefaultKeys || s.GuestPath != nil || s.CallTimeoutMs != 2000 || s.MemoryLimitMiB != 512 {
		t.Fatalf("default settings %+v %v", s, err)
	}
	if _, err := NewRuntime(nil); !errors.Is(err, ErrLoad) {
		t.Fatalf("empty component: %v", err)
	}
}

func TestEveryCallIsCounted(t *testing.T) {
	c := newTestCluster(t, "")
	before, total := c.Crossings(), Crossings()
	if err := c.ApplyFacts(twoRacks().Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PreFilter("ns", "p1", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Assume("ns", "p1", "a-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Forget("ns", "p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Settings(); err != nil {
		t.Fatal(err)
	}
	if got := c.Crossings() - before; got != 5 {
		t.Fatalf("cluster crossings %d, want 5", got)
	}
	if got := Crossings() - total; got < 5 {
		t.Fatalf("process crossings %d, want at least 5", got)
	}
}

func TestDecisionDecoding(t *testing.T) {
	// status Success, domain "d", exclusive, other Unschedulable "x", one clique, one node, a node set.
	var b []byte
	b = append(b, "CDP4"...)
	b = append(b, 2, 0, 0, 0)
	b = appendStr(b, "")
	b = appendStr(b, "x")
	b = append(b, byte(CodeSuccess), 0, 0, 0, 0)
	b = appendStr(append(b, 1), "d")
	b = append(b, 1)
	b = append(b, byte(CodeUnschedulable), 1, 0, 0, 0, 0, 0, 0, 0)
	b = append(b, 1, 0, 0, 0)
	b = appendStr(b, "u.1")
	b = append(b, byte(CodeSuccess), 0, 0, 0, 0, 70, 0, 0, 0)
	flagsAt := len(b)
	b = append(b, cliqueStable)
	b = append(b, 1, 0, 0, 0)
	b = appendStr(b, "a-0")
	b = append(b, byte(CodeUnschedulable), 1, 0, 0, 0)
	b = append(b, 1, 1, 0, 0, 0)
	b = appendStr(b, "a-1")
	d, err := DecodeDecision(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.Domain != "d" || !d.Exclusive || d.Other.Reason != "x" || !slices.Equal(d.NodeSet, []string{"a-1"}) || !d.Cliques["u.1"].Stable {
		t.Fatalf("decoded %+v", d)
	}
	for _, c := range []struct {
		node, clique string
		code         Code
		score        int64
	}{{"a-0", "u.1", CodeUnschedulable, 0}, {"a-1", "u.1", CodeSuccess, 70}, {"z", "", CodeUnschedulable, 0}} {
		v, score, _ := d.Node(c.node, c.clique)
		if v.Code != c.code || score != c.score {
			t.Errorf("%s: %v %d, want %v %d", c.node, v.Code, score, c.code, c.score)
		}
	}
	for i := 4; i < len(b); i++ {
		if _, err := DecodeDecision(b[:i]); err == nil {
			t.Fatalf("a decision cut at byte %d must be an error", i)
		}
	}
	bad := slices.Clone(b)
	bad[4+4+4+4+1] = 9 // the status code
	if _, err := DecodeDecision(bad); err == nil || !strings.Contains(err.Error(), "is not a cdplace_code_t") {
		t.Fatalf("bad code: %v", err)
	}
	bad = slices.Clone(b)
	bad[flagsAt] = 2
	if _, err := DecodeDecision(bad); err == nil || !strings.Contains(err.Error(), "clique flags 0x2") {
		t.Fatalf("undefined clique flag: %v", err)
	}
	bad[flagsAt] = 0
	if d, err := DecodeDecision(bad); err != nil || d.Cliques["u.1"].Stable {
		t.Fatalf("flags 0: not stable: %+v %v", d, err)
	}
	if _, err := DecodeDecision(append(slices.Clone(b), 0)); err == nil {
		t.Fatal("trailing bytes must be an error")
	}
}

// PassesEveryNode is true only when no part of the decision can fail a node.
func TestPassesEveryNode(t *testing.T) {
	ok := Verdict{Code: CodeSuccess}
	no := Verdict{Code: CodeUnschedulable, Reason: "x"}
	all := func() *Decision {
		return &Decision{Status: ok, Other: ok, Cliques: map[string]CliqueVerdict{"u.1": {Verdict: ok, Score: 10}}, Nodes: map[string]Verdict{"a-0": ok}}
	}
	if !all().computePassesAll() {
		t.Error("every verdict Success: passes every node")
	}
	for name, edit := range map[string]func(*Decision){
		"status":    func(d *Decision) { d.Status = no },
		"other":     func(d *Decision) { d.Other = no },
		"clique":    func(d *Decision) { d.Cliques["u.2"] = CliqueVerdict{Verdict: no} },
		"node":      func(d *Decision) { d.Nodes["a-1"] = no },
		"node set":  func(d *Decision) { d.NodeSet = []string{"a-0"} },
		"exclusive": func(d *Decision) { d.Exclusive = true },
	} {
		d := all()
		edit(d)
		if d.computePassesAll() {
			t.Errorf("%s fails a node: must not pass every node", name)
		}
	}
}

// The Go encoder writes the ResourceSlice record as the library reads it (pool and generation
// after the GPUs), and a CDF2 batch of an older adapter is refused whole.
func TestSliceRecordsAndTheBatchVersion(t *testing.T) {
	c := newTestCluster(t, "")
	var b Batch
	b.Add(AppendSlice(nil, &facts.Slice{Name: "s-1", Node: some("a-0"), GPUs: 4, Pool: "a-0", Generation: 1 << 40}))
	if err := c.ApplyFacts(b.Bytes()); err != nil {
		t.Fatalf("a slice record: %v", err)
	}
	var noPool Batch
	noPool.Add(AppendSlice(nil, &facts.Slice{Name: "s-2", Node: some("a-0"), GPUs: 4}))
	if err := c.ApplyFacts(noPool.Bytes()); !errors.Is(err, ErrBadCall) || !strings.Contains(err.Error(), "record 0 at byte 29: pool: must not be empty") {
		t.Fatalf("a node-local slice without a pool: %v", err)
	}
	old := append([]byte("CDF2"), b.Bytes()[4:]...)
	if err := c.ApplyFacts(old); !errors.Is(err, ErrBadCall) || !strings.Contains(err.Error(), `magic: expected "CDF3", got "CDF2"`) {
		t.Fatalf("a CDF2 batch: %v", err)
	}
}

// The Go encoder writes the Pod record as the library reads it: byte for byte the record
// host-shim/lib/tests/facts.rs decodes to the same facts
// (the_pod_record_ends_with_the_runtime_limit_and_the_start_time), the runtime limit and the
// start time last, where the library reads them.
func TestPodRecordsAsTheLibraryReadsThem(t *testing.T) {
	pod := func(limit *int64) *facts.Pod {
		return &facts.Pod{Namespace: "ns", Name: "p", GPUs: 4, CreatedMs: 1_782_900_005_000, Priority: -3,
			RuntimeLimitMs: limit, StartedMs: 1_782_900_009_000}
	}
	var b Batch
	b.Add(AppendPod(nil, pod(some(int64(630_000)))))
	want := slices.Concat(
		[]byte("CDF3"),
		[]byte{1, 0, 0, 0},           // one record
		[]byte{1, 2},                 // upsert Pod
		[]byte{2, 0, 0, 0, 'n', 's'}, // str namespace
		[]byte{1, 0, 0, 0, 'p'},      // str name
		[]byte{0, 0, 0},              // terminal, nodeName, nominatedNodeName
		[]byte{0, 0, 0, 0},           // nclaims
		[]byte{4, 0, 0, 0},           // u32 gpus
		[]byte{0, 0, 0},              // sizeAnnotation, podGroupName, ownerKey
		[]byte{0x88, 0x18, 0x1f, 0x1d, 0x9f, 0x01, 0, 0}, // i64 createdMs 1782900005000
		[]byte{0xfd, 0xff, 0xff, 0xff},                   // i32 priority -3
		[]byte{1, 0xf0, 0x9c, 0x09, 0, 0, 0, 0, 0},       // oi64 runtimeLimitMs 630000
		[]byte{0x28, 0x28, 0x1f, 0x1d, 0x9f, 0x01, 0, 0}, // i64 startedMs 1782900009000
	)
	if got := b.Bytes(); !slices.Equal(got, want) {
		t.Fatalf("pod record\n got % x\nwant % x", got, want)
	}
	if none := AppendPod(nil, pod(nil)); !slices.Equal(none[len(none)-9:], append([]byte{0}, want[len(want)-8:]...)) {
		t.Fatalf("no runtime limit: % x", none)
	}
	c := newTestCluster(t, "")
	// With and without a limit, and a record after each: the library reads exactly the bytes
	// written.
	var all Batch
	all.Add(AppendPod(nil, pod(some(int64(math.MaxInt64)))))
	all.Add(AppendNode(nil, &facts.Node{Name: "a-0", CliqueLabel: some("u.1"), GPUs: 4}))
	q := pod(nil)
	q.Name = "q"
	all.Add(AppendPod(nil, q))
	all.Add(AppendNode(nil, &facts.Node{Name: "a-1", CliqueLabel: some("u.1"), GPUs: 4}))
	if err := c.ApplyFacts(all.Bytes()); err != nil {
		t.Fatalf("pod records: %v", err)
	}
	badTag := slices.Clone(want)
	badTag[47] = 2
	if err := c.ApplyFacts(badTag); !errors.Is(err, ErrBadCall) || !strings.Contains(err.Error(), "record 0 at byte 47: runtimeLimitMs: option tag 2 is not 0 or 1") {
		t.Fatalf("the runtime limit's tag: %v", err)
	}
	if err := c.ApplyFacts(want[:len(want)-2]); !errors.Is(err, ErrBadCall) || !strings.Contains(err.Error(), "record 0 at byte 56: startedMs: truncated") {
		t.Fatalf("the start time cut short: %v", err)
	}
}

// Stats reads the journal and the instances through the C ABI: an instance checked in after a
// call is idle, and it pins the journal entries applied after it until it catches up.
func TestStatsShowTheJournalAndTheInstances(t *testing.T) {
	c := newTestCluster(t, "")
	if err := c.ApplyFacts(twoRacks().Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PreFilter("ns", "p1", nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.IdleInstances != 1 || s.BusyInstances != 0 || s.JournalLength != 0 {
		t.Fatalf("after a call: %+v", s)
	}
	if err := c.Assume("ns", "p1", "a-1"); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Stats(); s.JournalLength == 0 {
		t.Fatalf("a change behind the idle instance is journaled: %+v", s)
	}
}

// NodeAt with the clique's entry looked up ahead (Slots) answers as Node, for a listed clique,
// an unlisted one, a node of its own and a node without a clique.
func TestSlotsAnswerAsNode(t *testing.T) {
	d := &Decision{
		Cliques: map[string]CliqueVerdict{
			"u.1": {Verdict: Verdict{Code: CodeSuccess}, Score: 70},
			"u.2": {Verdict: Verdict{Code: CodeUnschedulable, Reason: "full"}},
		},
		Other:      Verdict{Code: CodeUnschedulable, Reason: "other"},
		OtherScore: 5,
		Nodes:      map[string]Verdict{"a-0": {Code: CodeUnschedulable, Reason: "promised"}, "a-1": {Code: CodeSuccess}},
	}
	labels := []string{"u.2", "", "u.9", "u.1"}
	ordinal := func(l string) (int, bool) { i := slices.Index(labels, l); return i, i >= 0 }
	slots := d.Slots(len(labels), ordinal)
	if !slots[3].Listed || slots[3].Score != 70 || !slots[0].Listed || slots[1].Listed || slots[2].Listed {
		t.Fatalf("slots %+v", slots)
	}
	for _, status := range []Verdict{{Code: CodeSuccess}, {Code: CodeUnschedulable, Reason: "no"}} {
		d.Status = status
		for _, node := range []string{"a-0", "a-1", "a-2"} {
			for i, l := range labels {
				v, score, scored := d.NodeAt(node, slots[i])
				wv, wscore, wscored := d.Node(node, l)
				if v != wv || score != wscore || scored != wscored {
					t.Errorf("status %v, %s in %q: NodeAt %v %d %v, Node %v %d %v", status.Code, node, l, v, score, scored, wv, wscore, wscored)
				}
			}
		}
	}
}

// A batch emptied by Reset encodes its next records exactly as a new batch does, in the buffer
// it had: the feed reuses the buffer of the batch it applied last (an empty batch's header
// counts no record), and refilling it allocates nothing.
func TestAResetBatchIsANewBatchInTheSameBuffer(t *testing.T) {
	records := [][]byte{
		AppendNode(nil, &facts.Node{Name: "a-0", CliqueLabel: some("u.1"), GPUs: 4}),
		AppendNode(nil, &facts.Node{Name: "a-1", CliqueLabel: some("u.1"), GPUs: 4}),
		AppendRemove(nil, KindNode, "", "a-2"),
	}
	var fresh, reused Batch
	for _, r := range records {
		fresh.Add(r)
	}
	reused.Add(AppendNode(nil, &facts.Node{Name: "an-older-node-with-a-longer-name", GPUs: 8}))
	reused.Reset()
	if reused.Len() != 0 || !bytes.Equal(reused.Bytes(), []byte("CDF3\x00\x00\x00\x00")) {
		t.Fatalf("an emptied batch: %d records, %q", reused.Len(), reused.Bytes())
	}
	buffer := reused.Cap()
	if allocs := testing.AllocsPerRun(1, func() {
		reused.Reset()
		for _, r := range records {
			reused.Add(r)
		}
	}); allocs != 0 || reused.Cap() != buffer {
		t.Fatalf("refilling an emptied batch: %v allocations, capacity %d (was %d)", allocs, reused.Cap(), buffer)
	}
	if !bytes.Equal(reused.Bytes(), fresh.Bytes()) || reused.Len() != fresh.Len() {
		t.Fatalf("a refilled batch differs from a new one:\n%q\n%q", reused.Bytes(), fresh.Bytes())
	}
	c := newTestCluster(t, "")
	if err := c.ApplyFacts(reused.Bytes()); err != nil {
		t.Fatalf("the library refused the refilled batch: %v", err)
	}
}
