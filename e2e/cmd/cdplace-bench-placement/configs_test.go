package main

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// A config name sets the args it names on the shipped profile, and nothing else; a bad name is
// refused with the part that is wrong.
func TestParseConfigsSetsTheNamedArgs(t *testing.T) {
	root, cfgs := repoConfigs(t, "baseline,cdplace,cdplace-reserve2,cdplace-reserveafter3-depth4")
	if len(cfgs) != 4 || cfgs[0].PluginConfig != nil || cfgs[1].PluginConfig != nil {
		t.Fatalf("baseline and cdplace run as shipped: %+v", cfgs)
	}
	args := func(c config) map[string]any {
		var list []map[string]any
		if err := yaml.Unmarshal(c.PluginConfig, &list); err != nil {
			t.Fatal(err)
		}
		for _, pc := range list {
			if pc["name"] == "ComputeDomainPlacement" {
				return pc["args"].(map[string]any)
			}
		}
		t.Fatalf("%s: no ComputeDomainPlacement args", c.Name)
		return nil
	}
	if a := args(cfgs[2]); a["reserveTraysPerClique"] != float64(2) || a["cliqueReservationDepth"] != nil {
		t.Errorf("cdplace-reserve2: %v", a)
	}
	c := cfgs[3]
	a := args(c)
	if a["cliqueReservationAfterSeconds"] != float64(3) || a["cliqueReservationDepth"] != float64(4) || a["reserveTraysPerClique"] != float64(0) {
		t.Errorf("cdplace-reserveafter3-depth4: %v", a)
	}
	if c.ReserveAfter != 3 || c.Depth != 4 || c.Reserve != 0 {
		t.Errorf("fields: %+v", c)
	}
	if d := describe(c, 18); d != "computedomain-scheduler, cliqueReservationAfterSeconds: 3 (54 trace seconds), cliqueReservationDepth: 4" {
		t.Errorf("describe: %q", d)
	}
	for name, want := range map[string]string{
		"cdplace-depth0":        `"depth0" wants depth<N>`,
		"cdplace-fast":          `unknown part "fast"`,
		"cdplace-depth2-depth3": "sets depth twice",
		"cdplace-reserveafterx": `"reserveafterx" wants reserveafter<N>`,
		"stock":                 `unknown config "stock"`,
	} {
		if _, err := parseConfigs(root, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, want)
		}
	}
}

// -baseline-cap ends only the stock baseline's run early; every cdplace configuration keeps -cap.
func TestBaselineCapIsTheBaselinesOnly(t *testing.T) {
	_, cfgs := repoConfigs(t, "baseline,cdplace-reserveafter3")
	o := runOptions{Cap: 14400, BaselineCap: 4500}
	if got := o.capFor(cfgs[0]); got != 4500 {
		t.Errorf("baseline cap %v; want 4500", got)
	}
	if got := o.capFor(cfgs[1]); got != 14400 {
		t.Errorf("cdplace-reserveafter3 cap %v; want -cap's 14400", got)
	}
	o.BaselineCap = 0
	if got := o.capFor(cfgs[0]); got != 14400 {
		t.Errorf("baseline cap without -baseline-cap %v; want -cap's 14400", got)
	}
}

// repoConfigs parses names against this repository's shipped profile; it returns the root too.
func repoConfigs(t *testing.T, names string) (string, []config) {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := parseConfigs(root, names)
	if err != nil {
		t.Fatal(err)
	}
	return root, cfgs
}
