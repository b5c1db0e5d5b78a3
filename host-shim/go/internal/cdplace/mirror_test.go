package cdplace

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The Go side takes every number from the header through cgo (C.CDPLACE_...), so no value can
// drift; what can is the set: an error kind added to include/cdplace.h without its sentinel, a
// status code or record kind without its name. This reads the header's enumerators and checks
// each has its Go copy (the Rust copies are asserted at compile time: host-shim/lib/build.rs).
func TestEveryEnumeratorOfTheHeaderHasItsGoCopy(t *testing.T) {
	header, err := os.ReadFile("../../../lib/include/cdplace.h")
	if err != nil {
		t.Fatal(err)
	}
	enumerator := regexp.MustCompile(`(?m)^\s*CDPLACE_(ERROR|CODE|KIND)_([A-Z_]+)\s*=\s*(\d+)`)
	seen := map[string]int{}
	for _, m := range enumerator.FindAllStringSubmatch(string(header), -1) {
		v, _ := strconv.Atoi(m[3])
		seen[m[1]]++
		switch m[1] {
		case "ERROR":
			if _, ok := sentinels[v]; !ok {
				t.Errorf("CDPLACE_ERROR_%s = %d has no sentinel", m[2], v)
			}
		case "CODE":
			if _, ok := codeNames[Code(v)]; !ok {
				t.Errorf("CDPLACE_CODE_%s = %d has no name", m[2], v)
			}
		case "KIND":
			if _, ok := kindNames[Kind(v)]; !ok {
				t.Errorf("CDPLACE_KIND_%s = %d has no name", m[2], v)
			}
		}
	}
	if seen["ERROR"] != len(sentinels) || seen["CODE"] != len(codeNames) || seen["KIND"] != len(kindNames) {
		t.Errorf("the header declares %v; Go has %d sentinels, %d codes, %d kinds", seen, len(sentinels), len(codeNames), len(kindNames))
	}
}

// The safety rules' names are the library's (host-shim/lib/src/safety.rs Rule::name): the rule
// label of cdplace_policy_violations_total takes exactly those values.
func TestPolicyViolationRulesAreTheLibrarys(t *testing.T) {
	src, err := os.ReadFile("../../../lib/src/safety.rs")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`Rule::\w+ => "([a-z-]+)"`).FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 || !slices.Equal(names, PolicyViolationRules) {
		t.Errorf("safety.rs names the rules %q; PolicyViolationRules is %q", names, PolicyViolationRules)
	}
	if got := PolicyViolationRule(&Error{Kind: ErrPolicyViolation, Message: policyViolationPrefix + "one-clique-per-domain: ComputeDomain pod ns/p ..."}); got != "one-clique-per-domain" {
		t.Errorf("PolicyViolationRule = %q", got)
	}
	if got := PolicyViolationRule(&Error{Kind: ErrTrap, Message: policyViolationPrefix + "one-clique-per-domain: x"}); got != "" {
		t.Errorf("PolicyViolationRule of a trap = %q", got)
	}
}
