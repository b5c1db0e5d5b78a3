package computedomain

import (
	v1 "k8s.io/api/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Which pods are ComputeDomain pods, decided in Go from the feed's facts in O(claims), with no
// call into the policy: every other pod is skipped at once.

// resolved is what one of a pod's claims says about its domain.
type resolved struct {
	ref domainRef
	// named: the claim (or its template) names a domain.
	named bool
	// known: the feed has the claim or template the answer came from.
	known bool
}

// listers read claims and templates the feed has not seen yet (its handlers lag the informers'
// caches a little).
type listers struct {
	claims    resourcelisters.ResourceClaimLister
	templates resourcelisters.ResourceClaimTemplateLister
}

// resolveLocked resolves each of a pod's claims as the policy does (guest/policy member.rs):
// the generated claim (or the shared claim) when the view has it, else the claim's template.
func (f *feed) resolveLocked(ns string, claims []facts.PodClaim, out []resolved) []resolved {
	out = out[:0]
	for i := range claims {
		c := &claims[i]
		var r resolved
		if name := claimName(c); name != "" && f.hasLocked(objKey{kind: cdplace.KindResourceClaim, namespace: ns, name: name}) {
			r.ref, r.named = f.claimDomains[nsName{ns, name}]
			r.known = true
		} else if c.Template != nil && f.hasLocked(objKey{kind: cdplace.KindResourceClaimTemplate, namespace: ns, name: *c.Template}) {
			r.ref, r.named = f.templateDomains[nsName{ns, *c.Template}]
			r.known = true
		}
		out = append(out, r)
	}
	return out
}

// classify applies the policy's membership rule to resolved claims: the first claim that names
// a domain decides; a workload (not daemon) domain makes a ComputeDomain pod, and so do two
// different domains (the policy rejects such a pod with its reason).
func classify(rs []resolved) (domain string, cd bool) {
	var first *domainRef
	for i := range rs {
		if !rs[i].named {
			continue
		}
		if first == nil {
			first = &rs[i].ref
			continue
		}
		if rs[i].ref.domain != first.domain {
			return first.domain, true
		}
	}
	if first == nil {
		return "", false
	}
	return first.domain, !first.daemon
}

// isComputeDomainPod reports whether the policy decides for this pod, and its domain's UID. A
// claim or template the feed has not seen yet is read from the scheduler's listers.
func (f *feed) isComputeDomainPod(p *v1.Pod) (string, bool) {
	if len(p.Spec.ResourceClaims) == 0 {
		return "", false
	}
	claims := facts.PodClaims(p)
	var buf [4]resolved
	f.mu.Lock()
	rs := f.resolveLocked(p.Namespace, claims, buf[:0])
	f.mu.Unlock()
	for i := range rs {
		if !rs[i].known {
			rs[i] = f.fromListers(p.Namespace, &claims[i])
		}
	}
	return classify(rs)
}

// fromListers resolves one claim from the informers' caches.
func (f *feed) fromListers(ns string, c *facts.PodClaim) resolved {
	if f.listers.claims == nil {
		return resolved{}
	}
	if name := claimName(c); name != "" {
		if obj, err := f.listers.claims.ResourceClaims(ns).Get(name); err == nil {
			fact, err := facts.ClaimOf(obj, f.keys)
			if err != nil || fact.Domain == nil {
				return resolved{known: true}
			}
			return resolved{ref: domainRef{domain: *fact.Domain, daemon: fact.Daemon}, named: true, known: true}
		}
	}
	if c.Template != nil {
		if obj, err := f.listers.templates.ResourceClaimTemplates(ns).Get(*c.Template); err == nil {
			fact, err := facts.TemplateOf(obj, f.keys)
			if err != nil || fact.Domain == nil {
				return resolved{known: true}
			}
			return resolved{ref: domainRef{domain: *fact.Domain, daemon: fact.Daemon}, named: true, known: true}
		}
	}
	return resolved{}
}
