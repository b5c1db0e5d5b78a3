package config

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		obj     runtime.Object
		want    string
		wantErr string
	}{
		{name: "none", obj: nil, want: `{}`},
		{name: "empty", obj: &runtime.Unknown{}, want: `{}`},
		{name: "null", obj: &runtime.Unknown{Raw: []byte("null\n")}, want: `{}`},
		{name: "yaml", obj: &runtime.Unknown{Raw: []byte("wholeTray: Prefer\nreserveTraysPerClique: 2\nguestCallTimeout: 500ms\n")},
			want: `{"guestCallTimeout":"500ms","reserveTraysPerClique":2,"wholeTray":"Prefer"}`},
		{name: "json passes through unchanged", obj: &runtime.Unknown{Raw: []byte(`{"imexMode":"HostManaged","unknown":[1]}`)},
			want: `{"imexMode":"HostManaged","unknown":[1]}`},
		{name: "a list", obj: &runtime.Unknown{Raw: []byte("- a\n- b\n")}, wantErr: "decoding ComputeDomainPlacementArgs: want an object of fields, got a list"},
		{name: "a string", obj: &runtime.Unknown{Raw: []byte("wholeTray")}, wantErr: "decoding ComputeDomainPlacementArgs: want an object of fields, got a string"},
		{name: "bad yaml", obj: &runtime.Unknown{Raw: []byte("a: [")}, wantErr: "decoding ComputeDomainPlacementArgs: yaml: line 1: did not find expected node content"},
		{name: "typed", obj: &unstructured.Unstructured{}, wantErr: "want args to be of type runtime.Unknown (YAML or JSON), got *unstructured.Unstructured"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(c.obj)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}
