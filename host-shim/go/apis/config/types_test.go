package config

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name, raw, wantErr string
	}{
		{name: "yaml", raw: "wholeTray: Prefer\nreserveTraysPerClique: 2\nguestCallTimeout: 500ms\n"},
		{name: "json", raw: `{"imexMode":"HostManaged"}`},
		{name: "unknown field", raw: `{"wholeTrays":"Off"}`, wantErr: `decoding ComputeDomainPlacementArgs: json: unknown field "wholeTrays"`},
		{name: "wrong type", raw: `{"reserveTraysPerClique":"two"}`, wantErr: "decoding ComputeDomainPlacementArgs: json: cannot unmarshal string into Go struct field ComputeDomainPlacementArgs.reserveTraysPerClique of type int64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := Decode(&runtime.Unknown{Raw: []byte(c.raw)})
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(field.NewPath("args"), a); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := Decode(&runtime.Unknown{}); err != nil {
		t.Fatalf("empty args: %v", err)
	}
	if _, err := Decode(nil); err != nil {
		t.Fatalf("nil args: %v", err)
	}
}

func TestValidateHostFields(t *testing.T) {
	bad := int64(4)
	cases := []struct {
		args ComputeDomainPlacementArgs
		want string
	}{
		{ComputeDomainPlacementArgs{GuestCallTimeout: "soon"}, `args.guestCallTimeout: Invalid value: "soon": must be a duration such as 2s`},
		{ComputeDomainPlacementArgs{GuestCallTimeout: "2h"}, `args.guestCallTimeout: Invalid value: "2h": must be between 1ms and 1m`},
		{ComputeDomainPlacementArgs{GuestMemoryLimitMiB: &bad}, `args.guestMemoryLimitMiB: Invalid value: 4: must be between 16 and 65536`},
	}
	for _, c := range cases {
		err := Validate(field.NewPath("args"), &c.args)
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestPolicyArgsLeaveHostFieldsOut(t *testing.T) {
	two := int64(2)
	a := &ComputeDomainPlacementArgs{WholeTray: "Off", ReserveTraysPerClique: &two, GuestPath: "/x.wasm", GuestCallTimeout: "1s"}
	if got, want := string(a.PolicyArgs()), `{"wholeTray":"Off","reserveTraysPerClique":2}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
