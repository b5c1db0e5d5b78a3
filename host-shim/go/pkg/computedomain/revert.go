package computedomain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Automatic revert (issue 45): a policy can pass every check at swap time and still go wrong
// later, on a view it was not tested on (a new domain of a size nothing pending had) or after
// some calls. The host refuses each bad answer (a safety violation or a guest failure fails the
// pod closed), so nothing unsafe binds, but nothing the policy refuses starts either. When the
// host refuses the live policy's answers `failures` times within `window`, the generation
// before it is restored (checked as any swap is), with a Warning PolicyReverted Event on the
// source object, cdplace_policy_reverts_total, and the bad content marked refused so that the
// source does not offer it again; pods it left waiting are requeued at once (the swap's
// requeue). The embedded or first-loaded policy has no generation before it: nothing to revert
// to.
//
//	policyRevert: {failures: 5, window: 60s}   the default
//	policyRevert: {failures: 0}                off

// Defaults of policyRevert.
const (
	defaultRevertFailures = 5
	defaultRevertWindow   = time.Minute
)

// revertSettings is the args' `policyRevert` object.
type revertSettings struct {
	// Failures refused answers of the live policy within Window revert it; 0: never.
	Failures int
	Window   time.Duration
}

// parseRevert takes `policyRevert` out of the args (a JSON object; the host's field, never the
// policy's) and validates it.
func parseRevert(args []byte) (revertSettings, []byte, field.ErrorList) {
	out := revertSettings{Failures: defaultRevertFailures, Window: defaultRevertWindow}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(args, &all); err != nil || all == nil {
		// parseSources reports args that are not an object.
		return out, args, nil
	}
	raw, ok := all["policyRevert"]
	if !ok {
		return out, args, nil
	}
	delete(all, "policyRevert")
	rest, err := json.Marshal(all)
	p := argsPath.Child("policyRevert")
	if err != nil {
		return out, args, field.ErrorList{field.InternalError(p, err)}
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return out, rest, nil
	}
	var obj struct {
		Failures *int    `json:"failures"`
		Window   *string `json:"window"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return out, rest, field.ErrorList{field.Invalid(p, string(raw), "must be an object {failures: N, window: DURATION}: "+err.Error())}
	}
	var errs field.ErrorList
	if obj.Failures != nil {
		out.Failures = *obj.Failures
		if out.Failures < 0 || out.Failures > 10000 {
			errs = append(errs, field.Invalid(p.Child("failures"), out.Failures, "must be between 0 (never revert) and 10000"))
		}
	}
	if obj.Window != nil {
		d, err := time.ParseDuration(*obj.Window)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("window"), *obj.Window, "must be a duration such as 60s"))
		case d < time.Second || d > time.Hour:
			errs = append(errs, field.Invalid(p.Child("window"), *obj.Window, "must be between 1s and 1h"))
		default:
			out.Window = d
		}
	}
	return out, rest, errs
}

// reverter counts the live policy's refused answers and says when they call for a revert.
type reverter struct {
	settings revertSettings
	now      func() time.Time

	mu sync.Mutex
	// gen is the generation the failures are of; at holds their times within the window.
	gen uint64
	at  []time.Time
	// fired: a revert of gen was asked for (once per generation).
	fired bool
}

// refused records a refused answer of generation gen; it reports whether that makes
// settings.Failures within settings.Window (once per generation).
func (r *reverter) refused(gen uint64) bool {
	if r == nil || r.settings.Failures <= 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		r.gen, r.at, r.fired = gen, r.at[:0], false
	}
	now := r.now()
	keep := r.at[:0]
	for _, t := range r.at {
		if now.Sub(t) < r.settings.Window {
			keep = append(keep, t)
		}
	}
	r.at = append(keep, now)
	if r.fired || len(r.at) < r.settings.Failures {
		return false
	}
	r.fired = true
	return true
}

// describe is the revert's cause for messages.
func (r *reverter) describe() string {
	return fmt.Sprintf("%d refused answers within %s (policyRevert)", r.settings.Failures, r.settings.Window)
}
