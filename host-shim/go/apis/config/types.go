// Package config holds ComputeDomainPlacementArgs, the plugin's arguments in the scheduler's
// pluginConfig: decoding (unknown fields are errors), defaults and validation of the host fields.
// The policy fields are validated by the policy itself (exactly one validator, in Rust), and
// its messages are passed through unchanged.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// ComputeDomainPlacementArgs are the plugin's arguments.
type ComputeDomainPlacementArgs struct {
	// Policy fields (see the README's table); validated by the policy.
	APIVersion            string `json:"apiVersion,omitempty"`
	Kind                  string `json:"kind,omitempty"`
	ImexMode              string `json:"imexMode,omitempty"`
	WholeTray             string `json:"wholeTray,omitempty"`
	ReserveTraysPerClique *int64 `json:"reserveTraysPerClique,omitempty"`
	MaxTraysPerClique     *int64 `json:"maxTraysPerClique,omitempty"`
	CliqueLabel           string `json:"cliqueLabel,omitempty"`
	GPUResourceName       string `json:"gpuResourceName,omitempty"`
	GPUDriver             string `json:"gpuDriver,omitempty"`
	ComputeDomainDriver   string `json:"computeDomainDriver,omitempty"`
	SizeAnnotation        string `json:"sizeAnnotation,omitempty"`

	// Host fields.
	// GuestPath loads the policy component from a file instead of the embedded one.
	GuestPath string `json:"guestPath,omitempty"`
	// GuestCallTimeout bounds one policy call (default 2s).
	GuestCallTimeout string `json:"guestCallTimeout,omitempty"`
	// GuestMemoryLimitMiB bounds a policy instance's memory (default 512).
	GuestMemoryLimitMiB *int64 `json:"guestMemoryLimitMiB,omitempty"`
}

// PolicyArgs is the JSON the policy validates: the policy fields only.
func (a *ComputeDomainPlacementArgs) PolicyArgs() []byte {
	p := *a
	p.GuestPath, p.GuestCallTimeout, p.GuestMemoryLimitMiB = "", "", nil
	b, err := json.Marshal(&p)
	if err != nil {
		panic(err) // a struct of strings and ints always marshals
	}
	return b
}

// CallTimeout is GuestCallTimeout parsed (after Validate).
func (a *ComputeDomainPlacementArgs) CallTimeout() time.Duration {
	if a.GuestCallTimeout == "" {
		return 2 * time.Second
	}
	d, _ := time.ParseDuration(a.GuestCallTimeout)
	return d
}

// MemoryLimitBytes is GuestMemoryLimitMiB in bytes (after Validate).
func (a *ComputeDomainPlacementArgs) MemoryLimitBytes() uint64 {
	if a.GuestMemoryLimitMiB == nil {
		return 512 << 20
	}
	return uint64(*a.GuestMemoryLimitMiB) << 20
}

// Decode reads the args the framework hands a plugin factory: nil (no pluginConfig), a
// *runtime.Unknown holding JSON or YAML, or already typed args. Unknown fields are errors.
func Decode(obj runtime.Object) (*ComputeDomainPlacementArgs, error) {
	args := &ComputeDomainPlacementArgs{}
	switch o := obj.(type) {
	case nil:
		return args, nil
	case *ComputeDomainPlacementArgs:
		return o, nil
	case *runtime.Unknown:
		if len(o.Raw) == 0 {
			return args, nil
		}
		raw, err := yaml.YAMLToJSON(o.Raw)
		if err != nil {
			return nil, fmt.Errorf("decoding ComputeDomainPlacementArgs: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(args); err != nil {
			return nil, fmt.Errorf("decoding ComputeDomainPlacementArgs: %w", err)
		}
		return args, nil
	default:
		return nil, fmt.Errorf("want args to be of type ComputeDomainPlacementArgs, got %T", obj)
	}
}

// Validate checks the host fields; the policy fields are checked by the policy.
func Validate(path *field.Path, a *ComputeDomainPlacementArgs) error {
	var errs field.ErrorList
	if a.GuestCallTimeout != "" {
		d, err := time.ParseDuration(a.GuestCallTimeout)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("guestCallTimeout"), a.GuestCallTimeout, "must be a duration such as 2s"))
		case d < time.Millisecond || d > time.Minute:
			errs = append(errs, field.Invalid(path.Child("guestCallTimeout"), a.GuestCallTimeout, "must be between 1ms and 1m"))
		}
	}
	if m := a.GuestMemoryLimitMiB; m != nil && (*m < 16 || *m > 65536) {
		errs = append(errs, field.Invalid(path.Child("guestMemoryLimitMiB"), *m, "must be between 16 and 65536"))
	}
	return errs.ToAggregate()
}

// DeepCopyObject and GetObjectKind make the typed args a runtime.Object.
func (a *ComputeDomainPlacementArgs) DeepCopyObject() runtime.Object {
	c := *a
	if a.ReserveTraysPerClique != nil {
		v := *a.ReserveTraysPerClique
		c.ReserveTraysPerClique = &v
	}
	if a.MaxTraysPerClique != nil {
		v := *a.MaxTraysPerClique
		c.MaxTraysPerClique = &v
	}
	if a.GuestMemoryLimitMiB != nil {
		v := *a.GuestMemoryLimitMiB
		c.GuestMemoryLimitMiB = &v
	}
	return &c
}

// GetObjectKind implements runtime.Object.
func (a *ComputeDomainPlacementArgs) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
