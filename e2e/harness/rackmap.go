package harness

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// PodDomain maps each ComputeDomain pod to its domain ("namespace/name") through the channel
// template it claims from, the way the driver ties them together.
func PodDomain(ctx context.Context, c kubernetes.Interface, dyn dynamic.Interface) (map[string]string, []corev1.Pod, error) {
	cds, err := dyn.Resource(ComputeDomainGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	byTemplate := map[string]string{}
	for _, cd := range cds.Items {
		name, _, _ := unstructured.NestedString(cd.Object, "spec", "channel", "resourceClaimTemplate", "name")
		byTemplate[cd.GetNamespace()+"/"+name] = cd.GetNamespace() + "/" + cd.GetName()
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		for _, rc := range p.Spec.ResourceClaims {
			if d, ok := byTemplate[p.Namespace+"/"+ptr.Deref(rc.ResourceClaimTemplateName, "")]; ok {
				out[p.Namespace+"/"+p.Name] = d
			}
		}
	}
	return out, pods.Items, nil
}

var (
	nodesAvailable = regexp.MustCompile(`^0/\d+ nodes are available: `)
	preemption     = regexp.MustCompile(`\. preemption: .*$`)
)

// ShortReason trims the scheduler's "0/N nodes are available: " frame and the preemption tail.
func ShortReason(msg string) string {
	return preemption.ReplaceAllString(nodesAvailable.ReplaceAllString(msg, ""), "")
}

// RackMap renders the fleet: one row per clique, one cell per tray with the letter of the
// domain holding it ('.' free, '+' a plain pod), then a legend and the waiting domains with the
// scheduler's reason.
func RackMap(ctx context.Context, c kubernetes.Interface, dyn dynamic.Interface, f *Fleet) (string, error) {
	domainOf, pods, err := PodDomain(ctx, c, dyn)
	if err != nil {
		return "", err
	}
	type dom struct {
		name                 string
		pods, bound, running int
		reason               string
		letter               byte
	}
	doms := map[string]*dom{}
	onNode := map[string][]string{} // node -> domains or "+"
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		d := domainOf[key]
		if d == "" {
			if p.Spec.NodeName != "" {
				onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], "+")
			}
			continue
		}
		st := doms[d]
		if st == nil {
			st = &dom{name: d}
			doms[d] = st
		}
		st.pods++
		if p.Spec.NodeName == "" {
			if r := PendingReason(&p); r != "" {
				st.reason = ShortReason(r)
			}
			continue
		}
		st.bound++
		if p.Status.Phase == corev1.PodRunning {
			st.running++
		}
		onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], d)
	}
	names := make([]string, 0, len(doms))
	for n := range doms {
		names = append(names, n)
	}
	sort.Strings(names)
	letters := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for i, n := range names {
		doms[n].letter = letters[i%len(letters)]
	}
	var b strings.Builder
	for _, clique := range f.Cliques {
		var cells []string
		busy := 0
		for _, n := range f.CliqueNodes(clique) {
			cell := "."
			for _, d := range onNode[n] {
				if d == "+" {
					cell = "+"
				} else {
					cell = string(doms[d].letter)
				}
			}
			if cell != "." {
				busy++
			}
			cells = append(cells, cell)
		}
		fmt.Fprintf(&b, "rack %d  clique …%s  [%s]  %2d/%d trays busy\n", f.RackOf[clique],
			clique[len(clique)-min(len(clique), 14):], strings.Join(cells, " "), busy, len(cells))
	}
	b.WriteString("\n")
	for _, n := range names {
		d := doms[n]
		fmt.Fprintf(&b, "  %c  %-28s %2d pods, %2d bound, %2d running\n", d.letter, d.name, d.pods, d.bound, d.running)
	}
	b.WriteString("  +  a pod without a ComputeDomain      .  a free tray\n")
	var waiting []string
	for _, n := range names {
		if d := doms[n]; d.bound < d.pods {
			waiting = append(waiting, fmt.Sprintf("  %s (%d of %d pods waiting): %s", d.name, d.pods-d.bound, d.pods, d.reason))
		}
	}
	if len(waiting) > 0 {
		b.WriteString("\nwaiting:\n" + strings.Join(waiting, "\n") + "\n")
	}
	return b.String(), nil
}
