package computedomain

import (
	v1 "k8s.io/api/core/v1"
)

// apiVersions of the kinds an Event can regard (Owner is not an object: logged only).
var apiVersions = map[string]string{
	"Node":                  "v1",
	"Pod":                   "v1",
	"ResourceClaim":         "resource.k8s.io/v1",
	"ResourceClaimTemplate": "resource.k8s.io/v1",
	"ComputeDomain":         "resource.nvidia.com/v1beta1",
	"PodGroup":              PodGroupGVR.GroupVersion().String(),
}

// reportQuarantined takes the objects the library quarantined since the last call (applying
// their facts trapped the guest; they are out of the view until their next update) and, for
// each, logs it, counts it and puts a Warning Event (reason Quarantined) on it. The policy goes
// on deciding without them.
func (p *Plugin) reportQuarantined() {
	logger := p.logger
	qs, err := p.cluster.TakeQuarantined()
	if err != nil {
		logger.Error(err, "ComputeDomainPlacement: reading the quarantined objects")
		return
	}
	for _, q := range qs {
		quarantinedObjects.WithLabelValues(q.Kind).Inc()
		logger.Info("ComputeDomainPlacement: object quarantined: applying its facts traps the policy; it is left out of the view until it changes",
			"kind", q.Kind, "namespace", q.Namespace, "name", q.Name, "err", q.Error)
		version, ok := apiVersions[q.Kind]
		rec := p.handle.EventRecorder()
		if !ok || rec == nil {
			continue
		}
		ref := &v1.ObjectReference{APIVersion: version, Kind: q.Kind, Namespace: q.Namespace, Name: q.Name}
		rec.Eventf(ref, nil, v1.EventTypeWarning, "Quarantined", "Scheduling",
			"ComputeDomainPlacement left this %s out of its view until it changes: applying its facts made the policy fail (%s)", q.Kind, q.Error)
	}
}

// afterCall reports what a policy call changed in the library: quarantined objects and the
// journal and instance gauges.
func (p *Plugin) afterCall() {
	observeStats(p.cluster)
	p.reportQuarantined()
}
