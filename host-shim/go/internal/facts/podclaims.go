package facts

import v1 "k8s.io/api/core/v1"

// PodClaims are a pod's spec.resourceClaims with the claims generated for them, nil for none.
func PodClaims(p *v1.Pod) []PodClaim {
	if len(p.Spec.ResourceClaims) == 0 {
		return nil
	}
	out := make([]PodClaim, len(p.Spec.ResourceClaims))
	for i, c := range p.Spec.ResourceClaims {
		out[i] = PodClaim{Name: c.Name, Template: c.ResourceClaimTemplateName, Claim: c.ResourceClaimName, Generated: GeneratedClaim(p, c.Name)}
	}
	return out
}

// UsesGPUsOrClaims reports whether a pod can hold a tray's GPUs at all: it has resource claims
// or names the GPU extended resource in a container's requests or limits.
func UsesGPUsOrClaims(p *v1.Pod, k Keys) bool {
	if len(p.Spec.ResourceClaims) > 0 {
		return true
	}
	gpu := v1.ResourceName(k.GPUResourceName)
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			if _, ok := cs[i].Resources.Requests[gpu]; ok {
				return true
			}
			if _, ok := cs[i].Resources.Limits[gpu]; ok {
				return true
			}
		}
	}
	return false
}
