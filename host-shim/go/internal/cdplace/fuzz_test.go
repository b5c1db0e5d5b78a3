package cdplace

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// The host–guest boundary under arbitrary input. A short run of each target is part of
// `make test` (`make fuzz-smoke`); `make fuzz` runs them for as long as FUZZTIME says.

// FuzzApplyFacts sends arbitrary bytes as a facts batch. The library must answer with a clean
// error (a malformed batch, an object it cannot use) or apply it; a rejected batch changes
// nothing (the decision for a known pod is the same as before it), and no input may make a
// later decision trap, time out or panic.
func FuzzApplyFacts(f *testing.F) {
	good := twoRacks().Bytes()
	f.Add(append([]byte(nil), good...))
	f.Add(good[:9])
	var rm Batch
	rm.Add(AppendRemove(nil, KindPod, "ns", "p0"))
	rm.Add(AppendRemove(nil, KindNode, "", "a-1"))
	f.Add(append([]byte(nil), rm.Bytes()...))
	f.Add([]byte("CDF3\xff\xff\xff\xff"))
	rt, err := NewRuntime(GuestWasm)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, batch []byte) {
		c, err := NewCluster(rt, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.ApplyFacts(twoRacks().Bytes()); err != nil {
			t.Fatal(err)
		}
		before := mustDecide(t, c, "ns", "p1")
		err = c.ApplyFacts(batch)
		if err != nil {
			if !errors.Is(err, ErrBadCall) && !errors.Is(err, ErrInvalidObject) {
				t.Fatalf("a bad batch must be refused as such, got %v", err)
			}
			if after := mustDecide(t, c, "ns", "p1"); !reflect.DeepEqual(before, after) {
				t.Fatalf("a refused batch changed the view:\nbefore %+v\nafter  %+v", before, after)
			}
			return
		}
		decideEverything(t, c, []string{"p0", "p1", "web"})
	})
}

// FuzzFactSequences builds well-formed records from the input (names and labels from small
// sets so that objects collide, counts that reach the integer limits) and applies them in
// batches, with Reserve and Unreserve in between, deciding for every pod after each batch.
// Whatever the facts say, the policy must decide: no trap, timeout, out-of-memory or panic.
func FuzzFactSequences(f *testing.F) {
	f.Add([]byte{0, 1, 1, 4, 0, 2, 1, 4, 5, 0, 0, 2, 3, 0, 0, 1, 0, 0, 1, 1, 4, 9, 1, 0, 1, 0})
	f.Add([]byte{5, 1, 0, 18, 0, 0, 0, 0, 255, 255, 1, 3, 0, 255, 9, 7, 1, 1, 2, 8, 3, 3})
	f.Add([]byte{0, 0, 0, 255, 4, 0, 0, 255, 4, 1, 0, 255, 2, 0, 1, 255, 255, 9, 6, 1, 0, 9})
	rt, err := NewRuntime(GuestWasm)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		c, err := NewCluster(rt, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := &fuzzReader{data: data}
		pods := map[string]bool{}
		var b Batch
		flush := func() {
			if b.Len() == 0 {
				return
			}
			if err := c.ApplyFacts(b.Bytes()); err != nil && !errors.Is(err, ErrInvalidObject) {
				t.Fatalf("well-formed records refused: %v", err)
			}
			b = Batch{}
			names := make([]string, 0, len(pods))
			for p := range pods {
				names = append(names, p)
			}
			decideEverything(t, c, names)
		}
		for !r.done() {
			switch r.byte() % 11 {
			case 0:
				b.Add(AppendNode(nil, &facts.Node{Name: r.name("n"), CliqueLabel: r.ostr("u."), DomainLabel: r.ostr("uid-"), Unschedulable: r.byte()%5 == 0, GPUs: r.count()}))
			case 1:
				name := r.name("p")
				pods[name] = true
				var claims []facts.PodClaim
				for range int(r.byte() % 3) {
					claims = append(claims, facts.PodClaim{Name: r.name("c"), Template: r.ostr("t"), Claim: r.ostr("rc"), Generated: r.ostr("g")})
				}
				b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: name, Terminal: r.byte()%7 == 0, NodeName: r.ostr("n"), NominatedNodeName: r.ostr("n"),
					Claims: claims, GPUs: r.count(), SizeHint: r.ocount(), PodGroup: r.ostr("pg"), Owner: r.ostr("Job/ns/j"), CreatedMs: int64(r.byte()) * 1000, Priority: int32(int8(r.byte())),
					RuntimeLimitMs: r.oms(), StartedMs: r.ms()}))
			case 2:
				var alloc *uint32
				if r.byte()%2 == 0 {
					alloc = some(r.count())
				}
				b.Add(AppendClaim(nil, &facts.Claim{Namespace: "ns", Name: r.name("rc"), Domain: r.ostr("uid-"), Daemon: r.byte()%4 == 0, GPUs: facts.GPUDemand{Count: r.count(), All: r.byte()%5 == 0}, AllocatedGPUs: alloc}))
			case 3:
				b.Add(AppendTemplate(nil, &facts.Template{Namespace: "ns", Name: r.name("t"), Domain: r.ostr("uid-"), Daemon: r.byte()%4 == 0, GPUs: facts.GPUDemand{Count: r.count()}}))
			case 4:
				b.Add(AppendSlice(nil, &facts.Slice{Name: r.name("s"), Node: r.ostr("n"), GPUs: r.count(), Pool: r.name("pool"), Generation: int64(r.byte() % 4)}))
			case 5:
				b.Add(AppendDomain(nil, &facts.Domain{Namespace: "ns", Name: r.name("cd"), UID: r.name("uid-"), SizeHint: r.ocount(), NumNodes: r.ocount()}))
			case 6:
				b.Add(AppendPodGroup(nil, &facts.PodGroup{Namespace: "ns", Name: r.name("pg"), MinCount: r.ocount(), Priority: some(int32(int8(r.byte())))}))
			case 7:
				b.Add(AppendOwner(nil, &facts.Owner{Key: "Job/ns/" + r.name("j"), Size: r.ocount(), Source: "Job ns/j spec.parallelism"}))
			case 8:
				kinds := []Kind{KindNode, KindPod, KindResourceClaim, KindResourceClaimTemplate, KindResourceSlice, KindComputeDomain, KindPodGroup, KindOwner}
				k := kinds[int(r.byte())%len(kinds)]
				ns := "ns"
				if k == KindNode || k == KindResourceSlice || k == KindOwner {
					ns = ""
				}
				b.Add(AppendRemove(nil, k, ns, r.name(map[Kind]string{KindNode: "n", KindPod: "p", KindResourceClaim: "rc", KindResourceClaimTemplate: "t", KindResourceSlice: "s", KindComputeDomain: "cd", KindPodGroup: "pg", KindOwner: "Job/ns/j"}[k])))
			case 9:
				flush()
				if err := c.Assume("ns", r.name("p"), r.name("n")); err != nil && !errors.Is(err, ErrUnknownPod) {
					t.Fatalf("assume: %v", err)
				}
			case 10:
				flush()
				if err := c.Forget("ns", r.name("p")); err != nil && !errors.Is(err, ErrUnknownPod) {
					t.Fatalf("forget: %v", err)
				}
			}
		}
		flush()
	})
}

// mustDecide is PreFilter for a pod the view has.
func mustDecide(t *testing.T, c *Cluster, ns, name string) *Decision {
	t.Helper()
	d, err := c.PreFilter(ns, name, nil)
	if err != nil {
		t.Fatalf("PreFilter %s/%s: %v", ns, name, err)
	}
	return d
}

// decideEverything asks every decision the plugin asks, for each named pod of namespace ns;
// only "not in the view" may fail.
func decideEverything(t *testing.T, c *Cluster, pods []string) {
	t.Helper()
	guestFailure := func(what string, err error) {
		if err != nil && !errors.Is(err, ErrUnknownPod) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for _, p := range pods {
		d, err := c.PreFilter("ns", p, nil)
		guestFailure("PreFilter "+p, err)
		if err == nil && d.Status.Code == CodeSuccess && d.NodeSet != nil && len(d.NodeSet) == 0 && !d.Exclusive {
			t.Fatalf("PreFilter %s: success with an empty node set", p)
		}
		_, err = c.PreFilter("ns", p, []Overlay{{Op: OverlayRemove, Namespace: "ns", Name: "p0"}})
		guestFailure("PreFilter with overlay "+p, err)
		_, err = c.Preempt("ns", p)
		guestFailure("Preempt "+p, err)
	}
	for _, gpus := range []bool{true, false} {
		_, err := c.Steer(gpus)
		guestFailure(fmt.Sprintf("Steer(%v)", gpus), err)
	}
	_, err := c.Status()
	guestFailure("Status", err)
}

// fuzzReader turns fuzz bytes into values; past the end it reads zeros.
type fuzzReader struct {
	data []byte
	at   int
}

func (r *fuzzReader) done() bool { return r.at >= len(r.data) }

func (r *fuzzReader) byte() byte {
	if r.done() {
		r.at++
		return 0
	}
	b := r.data[r.at]
	r.at++
	return b
}

// name is one of eight names with the prefix.
func (r *fuzzReader) name(prefix string) string { return fmt.Sprintf("%s%d", prefix, r.byte()%8) }

// ostr is none or one of four names.
func (r *fuzzReader) ostr(prefix string) *string {
	b := r.byte()
	if b%3 == 0 {
		return nil
	}
	return some(fmt.Sprintf("%s%d", prefix, b%4))
}

// count is small most of the time, and sometimes at the limits of uint32.
func (r *fuzzReader) count() uint32 {
	switch b := r.byte(); {
	case b == 255:
		return ^uint32(0)
	case b == 254:
		return 1 << 31
	case b >= 240:
		return uint32(b) << 20
	default:
		return uint32(b % 20)
	}
}

func (r *fuzzReader) ocount() *uint32 {
	if r.byte()%3 == 0 {
		return nil
	}
	return some(r.count())
}

// ms is a few seconds most of the time, and sometimes at the limits of int64.
func (r *fuzzReader) ms() int64 {
	switch b := r.byte(); {
	case b == 255:
		return math.MaxInt64
	case b == 254:
		return math.MinInt64
	case b >= 240:
		return -int64(b-240) * 1000
	default:
		return int64(b%20) * 1000
	}
}

func (r *fuzzReader) oms() *int64 {
	if r.byte()%3 == 0 {
		return nil
	}
	return some(r.ms())
}
