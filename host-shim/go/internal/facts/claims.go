package facts

import (
	"encoding/json"

	resourceapi "k8s.io/api/resource/v1"
)

// ClaimOf reads a ResourceClaim.
func ClaimOf(c *resourceapi.ResourceClaim, k Keys) (Claim, error) {
	const kind = "ResourceClaim"
	if err := required(kind, c.Namespace, c.Name, "metadata.name", c.Name); err != nil {
		return Claim{}, err
	}
	if err := required(kind, c.Namespace, c.Name, "metadata.namespace", c.Namespace); err != nil {
		return Claim{}, err
	}
	domain, daemon, err := channelConfig(kind, c.Namespace, c.Name, &c.Spec, k)
	if err != nil {
		return Claim{}, err
	}
	f := Claim{Namespace: c.Namespace, Name: c.Name, Domain: domain, Daemon: daemon, GPUs: gpuDemand(&c.Spec, k)}
	if a := c.Status.Allocation; a != nil {
		var n uint32
		for i := range a.Devices.Results {
			if a.Devices.Results[i].Driver == k.GPUDriver {
				n++
			}
		}
		f.AllocatedGPUs = &n
	}
	return f, nil
}

// TemplateOf reads a ResourceClaimTemplate: its domain is the label DomainLabel, else the
// domainID of its config; it is for daemons when TargetLabel says Daemon, else when its config
// is a daemon config.
func TemplateOf(t *resourceapi.ResourceClaimTemplate, k Keys) (Template, error) {
	const kind = "ResourceClaimTemplate"
	if err := required(kind, t.Namespace, t.Name, "metadata.name", t.Name); err != nil {
		return Template{}, err
	}
	if err := required(kind, t.Namespace, t.Name, "metadata.namespace", t.Namespace); err != nil {
		return Template{}, err
	}
	spec := &t.Spec.Spec
	domain, daemon, err := channelConfig(kind, t.Namespace, t.Name, spec, k)
	if err != nil {
		return Template{}, err
	}
	if v := t.Labels[DomainLabel]; v != "" {
		domain = some(v)
	}
	if v, ok := t.Labels[TargetLabel]; ok {
		daemon = v == TargetDaemon
	}
	return Template{Namespace: t.Namespace, Name: t.Name, Domain: domain, Daemon: daemon, GPUs: gpuDemand(spec, k)}, nil
}

// gpuDemand is what a claim spec asks of the GPU driver's device class; of a prioritized list
// (firstAvailable) the first alternative counts.
func gpuDemand(spec *resourceapi.ResourceClaimSpec, k Keys) GPUDemand {
	var d GPUDemand
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		var class string
		var mode resourceapi.DeviceAllocationMode
		var count int64
		switch {
		case r.Exactly != nil:
			class, mode, count = r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count
		case len(r.FirstAvailable) > 0:
			s := &r.FirstAvailable[0]
			class, mode, count = s.DeviceClassName, s.AllocationMode, s.Count
		default:
			continue
		}
		if class != k.GPUDriver {
			continue
		}
		if mode == allocationModeAll {
			d.All = true
			continue
		}
		if count == 0 { // unset (the API omits a zero count): one device
			count = 1
		}
		n := uint32(min(max(count, 0), int64(^uint32(0))))
		if d.Count+n < d.Count {
			d.Count = ^uint32(0)
		} else {
			d.Count += n
		}
	}
	return d
}

// channelConfig is the ComputeDomain a claim spec's opaque config of the compute-domain driver
// names (domainID) and whether that config is for a daemon: the first
// ComputeDomainChannelConfig or ComputeDomainDaemonConfig counts, and it must name a domain.
func channelConfig(kind, ns, name string, spec *resourceapi.ResourceClaimSpec, k Keys) (*string, bool, error) {
	for i := range spec.Devices.Config {
		o := spec.Devices.Config[i].Opaque
		if o == nil || o.Driver != k.ComputeDomainDriver {
			continue
		}
		raw := o.Parameters.Raw
		if raw == nil && o.Parameters.Object != nil {
			var err error
			if raw, err = json.Marshal(o.Parameters.Object); err != nil {
				return nil, false, &Error{Object: describe(kind, ns, name), Field: "spec.devices.config.opaque.parameters", Reason: err.Error()}
			}
		}
		var params map[string]json.RawMessage
		if err := json.Unmarshal(raw, &params); err != nil {
			if json.Valid(raw) {
				continue // not an object: names no domain
			}
			return nil, false, &Error{Object: describe(kind, ns, name), Field: "spec.devices.config.opaque.parameters",
				Reason: "opaque config of driver " + k.ComputeDomainDriver + " is not JSON: " + err.Error()}
		}
		var daemon bool
		switch jsonString(params[paramKind]) {
		case channelConfigKind:
		case daemonConfigKind:
			daemon = true
		default:
			continue
		}
		if id := jsonString(params[paramDomainID]); id != "" {
			return &id, daemon, nil
		}
		return nil, false, &Error{Object: describe(kind, ns, name), Field: "spec.devices.config.opaque.parameters.domainID",
			Reason: "opaque config of driver " + k.ComputeDomainDriver + " has no domainID"}
	}
	return nil, false, nil
}

// jsonString is a JSON string value, "" for anything else.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
