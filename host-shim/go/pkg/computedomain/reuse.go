package computedomain

import (
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Decision reuse: the next pods of a domain usually ask the same question (same claim sources,
// same GPUs) of an unchanged view, while they wait or when the pod before them failed another
// plugin's Filter. Such a pod gets the cached decision when nothing crossed into the view
// since (the feed's sequence number is unchanged) and the decision is younger than reuseMaxAge:
// a decision may depend on the time (a domain's settle window), so it is never kept long.

const (
	reuseMaxAge  = time.Second
	reuseEntries = 1024
)

type reused[T any] struct {
	answer T
	seq    uint64
	at     time.Time
}

// answers caches the last answer per question: PreFilter's decisions and gang preemption's
// refusals (a plan is carried out, never reused). An answer older than reuseMaxAge can never
// be returned, so put drops those at most once per reuseMaxAge: the map holds the questions of
// the last two seconds or so, not the last reuseEntries domains of the scheduler's lifetime
// (the hour-long soak's heap profile showed a thousand finished domains' decisions held).
type answers[T any] struct {
	now   func() time.Time
	mu    sync.Mutex
	m     map[string]reused[T]
	swept time.Time
}

// decisions are PreFilter's answers.
type decisions = answers[*cdplace.Decision]

func newDecisions(now func() time.Time) *decisions { return newAnswers[*cdplace.Decision](now) }

func newAnswers[T any](now func() time.Time) *answers[T] {
	return &answers[T]{now: now, m: map[string]reused[T]{}}
}

// question is what a decision depends on besides the view: the pod's namespace and domain,
// its claim sources (a template, not the claim generated from it), its GPUs, and what may size
// its domain (size annotation, PodGroup, owner) or rank it (priority).
func question(p *v1.Pod, domain string, k facts.Keys) string {
	var b strings.Builder
	b.WriteString(p.Namespace)
	b.WriteByte(0)
	b.WriteString(domain)
	for _, c := range p.Spec.ResourceClaims {
		b.WriteByte(0)
		b.WriteString(c.Name)
		switch {
		case c.ResourceClaimTemplateName != nil:
			b.WriteString("\x00t")
			b.WriteString(*c.ResourceClaimTemplateName)
		case c.ResourceClaimName != nil:
			b.WriteString("\x00c")
			b.WriteString(*c.ResourceClaimName)
		}
	}
	b.WriteByte(0)
	// A pod whose GPU sum does not fit never gets facts, so it is never decided nor reused.
	gpus, _ := facts.PodGPUs(p, k)
	b.WriteString(strconv.FormatUint(uint64(gpus), 10))
	b.WriteByte(0)
	b.WriteString(p.Annotations[k.SizeAnnotation])
	if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		b.WriteString("\x00g")
		b.WriteString(*g.PodGroupName)
	}
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			b.WriteString("\x00o")
			b.WriteString(r.Kind + "/" + r.Name)
		}
	}
	if p.Spec.Priority != nil {
		b.WriteString("\x00p")
		b.WriteString(strconv.FormatInt(int64(*p.Spec.Priority), 10))
	}
	return b.String()
}

// get returns the cached answer to q if the view is still at seq.
func (d *answers[T]) get(q string, seq uint64) (T, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.m[q]
	if !ok || r.seq != seq || d.now().Sub(r.at) >= reuseMaxAge {
		var zero T
		return zero, false
	}
	return r.answer, true
}

// put caches an answer given on the view at seq.
func (d *answers[T]) put(q string, seq uint64, a T) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if now.Sub(d.swept) >= reuseMaxAge {
		for k, r := range d.m {
			if now.Sub(r.at) >= reuseMaxAge {
				delete(d.m, k)
			}
		}
		d.swept = now
	}
	if len(d.m) >= reuseEntries {
		clear(d.m)
	}
	d.m[q] = reused[T]{answer: a, seq: seq, at: now}
}
