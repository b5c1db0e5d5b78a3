package main

// The configurations under test: parsing -configs and -seeds, the pluginConfig each runs, the
// order they run in, and how the report names them.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/e2e/harness"
)

// config is one scheduler configuration under test.
type config struct {
	Name         string
	Profile      harness.Profile
	PluginConfig []byte // the cdplace profile's pluginConfig; nil: as shipped
	Reserve      int    // reserveTraysPerClique in PluginConfig
	ReserveAfter int    // cliqueReservationAfterSeconds in PluginConfig; 0: the shipped default
	Depth        int    // cliqueReservationDepth in PluginConfig; 0: the shipped default
}

// parseSeeds reads "1,2" or "1,2,random" (at least one seed, no repeats): each "random" is a
// seed drawn by draw (again on a repeat), returned in drawn too so the caller can print it.
func parseSeeds(list string, draw func() uint64) (seeds, drawn []uint64, err error) {
	seen := map[uint64]bool{}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var n uint64
		if f == "random" {
			for n = draw(); seen[n]; n = draw() {
			}
			drawn = append(drawn, n)
		} else if n, err = strconv.ParseUint(f, 10, 64); err != nil {
			return nil, nil, fmt.Errorf("seed %q: want a number or \"random\": %w", f, err)
		}
		if seen[n] {
			return nil, nil, fmt.Errorf("seed %d given twice", n)
		}
		seen[n] = true
		seeds = append(seeds, n)
	}
	if len(seeds) == 0 {
		return nil, nil, errors.New("no seed")
	}
	return seeds, drawn, nil
}

// randomSeed draws a seed short enough to retype: 1 to 999,999.
func randomSeed() uint64 { return 1 + rand.Uint64N(999_999) }

// parseLoads reads "0.9" or "0.7,0.9,1.7": offered loads, each 0 (as drawn) or in (0, 10].
func parseLoads(list string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v < 0 || v > 10 || math.IsNaN(v) {
			return nil, fmt.Errorf("load %q: want 0 (as drawn) or a number in (0, 10], e.g. 0.9", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no load")
	}
	return out, nil
}

// runOrder is the order the configurations run in for the i-th seed: as listed for even i,
// reversed for odd i.
func runOrder(cfgs []config, i int) []config {
	out := append([]config(nil), cfgs...)
	if i%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// configArgs are the ComputeDomainPlacement args a config name may set: cdplace followed by
// any of -reserve<N>, -reserveafter<N>, -depth<N> (e.g. cdplace-reserveafter3-depth4).
var configArgs = []struct{ token, arg string }{
	{"reserveafter", "cliqueReservationAfterSeconds"}, // before "reserve": the longer prefix first
	{"reserve", "reserveTraysPerClique"},
	{"depth", "cliqueReservationDepth"},
}

func parseConfigs(root, list string) ([]config, error) {
	var out []config
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "baseline":
			out = append(out, config{Name: name, Profile: harness.Baseline})
		case name == "cdplace":
			out = append(out, config{Name: name, Profile: harness.Cdplace})
		case strings.HasPrefix(name, "cdplace-"):
			c, err := cdplaceWith(root, name)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		default:
			return nil, fmt.Errorf("unknown config %q (baseline, cdplace, cdplace-reserve<N>, cdplace-reserveafter<N>, cdplace-depth<N>, combined as cdplace-reserveafter3-depth4)", name)
		}
	}
	return out, nil
}

// cdplaceWith is the shipped cdplace profile with the args that name's -<token><N> parts set.
func cdplaceWith(root, name string) (config, error) {
	c := config{Name: name, Profile: harness.Cdplace}
	set := map[string]int{}
	for _, part := range strings.Split(strings.TrimPrefix(name, "cdplace-"), "-") {
		matched := false
		for _, a := range configArgs {
			digits, ok := strings.CutPrefix(part, a.token)
			if !ok {
				continue
			}
			n, err := strconv.Atoi(digits)
			if err != nil || n < 0 || (a.token != "reserve" && n < 1) {
				return config{}, fmt.Errorf("config %q: %q wants %s<N> (N ≥ 1; reserve<N> N ≥ 0)", name, part, a.token)
			}
			if _, dup := set[a.arg]; dup {
				return config{}, fmt.Errorf("config %q sets %s twice", name, a.token)
			}
			set[a.arg] = n
			matched = true
			break
		}
		if !matched {
			return config{}, fmt.Errorf("config %q: unknown part %q (reserve<N>, reserveafter<N>, depth<N>)", name, part)
		}
	}
	pc, err := pluginConfigWith(root, set)
	if err != nil {
		return config{}, err
	}
	c.PluginConfig = pc
	c.Reserve = set["reserveTraysPerClique"]
	c.ReserveAfter = set["cliqueReservationAfterSeconds"]
	c.Depth = set["cliqueReservationDepth"]
	return c, nil
}

// pluginConfigWith is the shipped profile's pluginConfig with ComputeDomainPlacement's args
// set from set.
func pluginConfigWith(root string, set map[string]int) ([]byte, error) {
	path := filepath.Join(root, "kube-scheduler-config", "scheduler-config.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Profiles []struct {
			PluginConfig []map[string]any `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cfg.Profiles) == 0 {
		return nil, fmt.Errorf("%s has no profiles", path)
	}
	list := cfg.Profiles[0].PluginConfig
	found := false
	for _, pc := range list {
		if pc["name"] != "ComputeDomainPlacement" {
			continue
		}
		args, _ := pc["args"].(map[string]any)
		if args == nil {
			args = map[string]any{}
			pc["args"] = args
		}
		for k, n := range set {
			args[k] = n
		}
		found = true
	}
	if !found {
		return nil, fmt.Errorf("%s: no ComputeDomainPlacement pluginConfig in the first profile", path)
	}
	return yaml.Marshal(list)
}

// sortConfigs puts results in the order of cfgs.
func sortConfigs(res []*ConfigResult, cfgs []config) {
	idx := map[string]int{}
	for i, c := range cfgs {
		idx[c.Name] = i
	}
	sort.SliceStable(res, func(i, j int) bool { return idx[res[i].Config] < idx[res[j].Config] })
}

func describe(c config, scale float64) string {
	switch {
	case c.Profile == harness.Baseline:
		return "default-scheduler, required pod affinity on the clique"
	case c.PluginConfig == nil:
		return "computedomain-scheduler as shipped"
	case c.ReserveAfter > 0 || c.Depth > 0:
		var parts []string
		if c.ReserveAfter > 0 {
			parts = append(parts, fmt.Sprintf("cliqueReservationAfterSeconds: %d (%.0f trace seconds)", c.ReserveAfter, float64(c.ReserveAfter)*scale))
		}
		if c.Depth > 0 {
			parts = append(parts, fmt.Sprintf("cliqueReservationDepth: %d", c.Depth))
		}
		if c.Reserve > 0 {
			parts = append(parts, fmt.Sprintf("reserveTraysPerClique: %d", c.Reserve))
		}
		return "computedomain-scheduler, " + strings.Join(parts, ", ")
	default:
		return "computedomain-scheduler, pluginConfig " + strings.Join(strings.Fields(string(c.PluginConfig)), " ")
	}
}

// paths resolves -repo and -out (relative to -repo unless absolute).
