package harness

import (
	"context"
	"fmt"
	"time"
)

// CrashLoopBackOff is how long a kubelet waits before it starts an exited container again: Initial
// after the first exit, doubling with every exit after that up to Max, and back to Initial once the
// container had run for Reset before it exited (the kubelet's 10 s, 5 min and 10 min).
type CrashLoopBackOff struct {
	Initial, Max, Reset time.Duration
}

// KubeletBackOff is the kubelet's CrashLoopBackOff.
var KubeletBackOff = CrashLoopBackOff{Initial: 10 * time.Second, Max: 5 * time.Minute, Reset: 10 * time.Minute}

// next is the wait before the restart after an exit, given the wait before the last restart (0
// for none) and how long the process ran.
func (b CrashLoopBackOff) next(last, ran time.Duration) time.Duration {
	if last == 0 || ran >= b.Reset {
		return b.Initial
	}
	return min(2*last, b.Max)
}

// Restarter keeps an Env's processes running for the playground: a process of the control plane
// (etcd, kube-apiserver, kube-controller-manager) or a scheduler that exits is started again with
// the same arguments after a CrashLoopBackOff wait (a scheduler as Scheduler.Restart starts it:
// without the extra flags of StartSchedulerWithArgs), and every exit and restart is told through
// say.
// Tests do not use it: there an exit the test did not cause must fail the test (ControlPlane.Check).
type Restarter struct {
	env     *Env
	backOff CrashLoopBackOff
	say     func(format string, a ...any)
	now     func() time.Time
	// down holds the components waiting for their restart, by name.
	down map[string]*restart
	// wait is the wait before each component's last restart (0 for none yet).
	wait map[string]time.Duration
	// restarts counts each component's restarts (a kubelet's restartCount).
	restarts map[string]int
}

// restart is a pending restart of an exited component.
type restart struct {
	at time.Time
	n  int
}

// NewRestarter watches env's processes; call Check periodically (once a second).
func NewRestarter(env *Env, backOff CrashLoopBackOff, say func(format string, a ...any)) *Restarter {
	return &Restarter{env: env, backOff: backOff, say: say, now: time.Now,
		down: map[string]*restart{}, wait: map[string]time.Duration{}, restarts: map[string]int{}}
}

// component is one process the Restarter watches.
type component struct {
	// name identifies the process; label names it for people ("kube-scheduler <name>" for a
	// scheduler).
	name, label string
	proc        *Process
	// start starts the exited process again and waits until it is healthy.
	start func(context.Context) error
}

func (r *Restarter) components() []component {
	cp := r.env.CP
	var out []component
	for i, p := range cp.procs {
		out = append(out, component{name: p.Name, label: p.Name, proc: p, start: func(ctx context.Context) error { return cp.startAgain(ctx, i) }})
	}
	for _, s := range cp.schedulers {
		out = append(out, component{name: s.Name, label: "kube-scheduler " + s.Name, proc: s.proc, start: s.Restart})
	}
	return out
}

// Check notes the components that have exited since the last call, telling which, how and when
// each will be started again, and starts those whose wait is over. It returns when those restarts
// are done (each waits until its process is healthy) or ctx ends.
func (r *Restarter) Check(ctx context.Context) {
	for _, c := range r.components() {
		exited, err := c.proc.Exited()
		if !exited {
			continue
		}
		pending := r.down[c.name]
		if pending == nil {
			wait := r.backOff.next(r.wait[c.name], c.proc.Ran())
			r.wait[c.name] = wait
			r.restarts[c.name]++
			pending = &restart{at: r.now().Add(wait), n: r.restarts[c.name]}
			r.down[c.name] = pending
			r.say("%s exited (%s) after running %v; restart %d in %v, at %s (log: %s)",
				c.label, exitStatus(err), c.proc.Ran().Round(time.Second), pending.n, wait,
				pending.at.Format(time.TimeOnly), c.proc.LogPath)
		}
		if r.now().Before(pending.at) || ctx.Err() != nil {
			continue
		}
		delete(r.down, c.name)
		if err := c.start(ctx); err != nil {
			// Exited again while starting, or not healthy in time: stopped if still running (so
			// it never runs twice), and the next Check backs off further.
			if ctx.Err() == nil {
				r.say("%s did not start: %v", c.label, err)
			}
			r.stopIfRunning(c.name)
			continue
		}
		r.say("%s is running again (restart %d)", c.label, pending.n)
	}
}

// stopIfRunning kills a component whose restart failed while its process still runs.
func (r *Restarter) stopIfRunning(name string) {
	for _, c := range r.components() {
		if c.name == name {
			if exited, _ := c.proc.Exited(); !exited {
				c.proc.Kill()
			}
		}
	}
}

// exitStatus says how a process ended: "exit status 1", "signal: killed", or "exit status 0".
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return fmt.Sprint(err)
}
