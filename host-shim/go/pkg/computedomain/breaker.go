package computedomain

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The breaker's settings, in one place: after breakerFailures consecutive guest failures (traps,
// timeouts, memory exhaustion, answers refused by the safety rules) it opens for breakerOpenFor; then it half-opens: calls go
// through, the first failure opens it again at once, the first success closes it.
const (
	breakerFailures = 5
	breakerOpenFor  = 30 * time.Second
)

// breaker stops asking a policy that keeps failing: while open, ComputeDomain pods get
// Unschedulable at once with the reason, and plain pods are not steered (they schedule as with
// the stock profile).
type breaker struct {
	mu        sync.Mutex
	now       func() time.Time
	failures  int
	last      string
	openUntil time.Time
}

// blocked is the reason calls are not made now, or "" when the breaker lets them through.
func (b *breaker) blocked() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() || !b.now().Before(b.openUntil) {
		return ""
	}
	return fmt.Sprintf("cdplace policy breaker open after %d guest failures (last: %s); retrying at %s",
		b.failures, b.last, b.openUntil.UTC().Format(time.RFC3339))
}

// record notes a policy call's outcome: a guest failure counts toward opening (or reopens a
// half-open breaker), a success closes it; other errors (an unknown pod, every instance busy)
// say nothing about the guest.
func (b *breaker) record(logger klog.Logger, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		if b.failures >= breakerFailures {
			logger.Info("ComputeDomainPlacement: policy breaker closed: a call succeeded")
		}
		b.failures = 0
		breakerOpen.Set(0)
	case cdplace.IsGuestFailure(err) || errors.Is(err, cdplace.ErrPolicyViolation):
		b.failures++
		b.last = err.Error()
		if b.failures >= breakerFailures {
			b.openUntil = b.now().Add(breakerOpenFor)
			breakerOpen.Set(1)
			logger.Error(err, "ComputeDomainPlacement: policy breaker open; ComputeDomain pods are rejected and plain pods not steered until it half-opens",
				"failures", b.failures, "until", b.openUntil)
		}
	}
}

// reset closes the breaker and forgets its failures: they were another policy's (a swap or a
// revert replaced it).
func (b *breaker) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.openUntil = 0, time.Time{}
	breakerOpen.Set(0)
}
