package cdplace

import (
	"reflect"
	"testing"
)

// The packed decision the plugin reads says exactly what the documented JSON says.
func TestPackedDecisionMatchesJSON(t *testing.T) {
	rt, err := NewRuntime(GuestWasm, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := []string{
		`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomain","metadata":{"name":"cd","namespace":"ns","uid":"uid-1"},"spec":{"numNodes":0}}`,
		`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"cd-channel","namespace":"ns","labels":{"resource.nvidia.com/computeDomain":"uid-1"}},"spec":{"spec":{}}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p0","namespace":"ns"},"spec":{"nodeName":"a-0","containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"4"}}}],"resourceClaims":[{"name":"channel","resourceClaimTemplateName":"cd-channel"}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"ns"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"4"}}}],"resourceClaims":[{"name":"channel","resourceClaimTemplateName":"cd-channel"}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns"},"spec":{"containers":[{"name":"c"}]}}`,
	}
	for i := 0; i < 3; i++ {
		for _, cl := range []string{"1", "2"} {
			objs = append(objs, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+string(rune('a'+i))+`-`+cl+`","labels":{"nvidia.com/gpu.clique":"u.`+cl+`"}},"status":{"allocatable":{"nvidia.com/gpu":"4"}}}`)
		}
	}
	objs = append(objs, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a-0","labels":{"nvidia.com/gpu.clique":"u.1"}},"status":{"allocatable":{"nvidia.com/gpu":"4"}}}`)
	for _, o := range objs {
		if _, err := c.Apply([]byte(o)); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
	}
	for _, pod := range []string{"p0", "p1", "web"} {
		packed, err := c.PreFilter("ns", pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		viaJSON, err := c.PreFilterJSON("ns", pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(packed, viaJSON) {
			t.Fatalf("%s: packed %+v\nJSON %+v", pod, packed, viaJSON)
		}
	}
	d, _ := c.PreFilter("ns", "p1", nil)
	if !d.Exclusive || len(d.AllowedNodes) != 4 || d.Status.Code != "Success" {
		t.Fatalf("p1 should be held to clique u.1's four nodes: %+v", d)
	}
	if _, err := unpack([]byte("CDP1\x05")); err == nil {
		t.Fatal("a truncated decision must be an error")
	}
}
