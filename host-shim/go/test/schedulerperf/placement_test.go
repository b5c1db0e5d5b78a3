package schedulerperf

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSummarizePlacement(t *testing.T) {
	node := func(name, clique string) v1.Node {
		return v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{cliqueLabel: clique}}}
	}
	pod := func(domain, node string) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{PodDomainLabel: domain}, UID: types.UID(domain + node)}}
		p.Spec.NodeName = node
		if node == "" {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Message: "0/4 nodes are available"}}
		}
		return p
	}
	nodes := []v1.Node{node("a1", "A"), node("a2", "A"), node("b1", "B")}
	pods := []v1.Pod{
		pod("whole", "a1"), pod("whole", "a2"),
		pod("split", "a1"), pod("split", "b1"),
		pod("partial", "b1"), pod("partial", ""),
		pod("unstarted", ""),
		{ObjectMeta: metav1.ObjectMeta{Name: "not-a-domain-pod"}},
	}
	got := SummarizePlacement(pods, nodes, cliqueLabel)
	want := Placement{Pods: 7, Bound: 5, Pending: 2, Domains: 4, Whole: 1, Split: 1, Partial: 1, Unstarted: 1,
		Reasons: map[string]int{"0/4 nodes are available": 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
