package cdplace

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// headerSettingsKeys is the keys include/cdplace.h documents for cdplace_cluster_settings, the
// one owner of the settings JSON (the Rust Settings is tested against it too:
// host-shim/lib/src/settings.rs).
func headerSettingsKeys(t *testing.T) []string {
	t.Helper()
	header, err := os.ReadFile("../../../lib/include/cdplace.h")
	if err != nil {
		t.Fatal(err)
	}
	h := string(header)
	start := strings.Index(h, "The validated arguments the host needs")
	end := strings.Index(h[start:], "Thread-safe")
	if start < 0 || end < 0 {
		t.Fatal("the settings doc of cdplace_cluster_settings is not in the header")
	}
	var keys []string
	for _, m := range regexp.MustCompile(`"([A-Za-z]+)"`).FindAllStringSubmatch(h[start:start+end], -1) {
		keys = append(keys, m[1])
	}
	slices.Sort(keys)
	return keys
}

// jsonKeys is the JSON names of a struct's fields, embedded structs' fields included.
func jsonKeys(typ reflect.Type) []string {
	var keys []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			keys = append(keys, jsonKeys(f.Type)...)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// Every key the host sends is one the Go Settings reads, and the other way round.
func TestSettingsReadEveryKeyTheHeaderDocuments(t *testing.T) {
	want := headerSettingsKeys(t)
	got := jsonKeys(reflect.TypeOf(Settings{}))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Go Settings reads %v; include/cdplace.h documents %v", got, want)
	}
	if len(want) < 10 {
		t.Fatalf("the header documents only %d keys: %v", len(want), want)
	}
}
