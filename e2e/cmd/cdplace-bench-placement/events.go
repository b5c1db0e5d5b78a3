package main

// The trace's events as the runner carries them out: domains and plain pods arriving and
// departing, tray failures (evicting what ran there), and withdrawing what is left at the end.

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/harness"
)

func (r *runner) arriveCD(a CDArrival) {
	rec := &cdRec{CDArrival: a}
	r.mu.Lock()
	rec.created = time.Now()
	rec.waitingSince = rec.created
	r.cds[a.Name] = rec
	r.cdOrder = append(r.cdOrder, rec)
	r.mu.Unlock()
	// As users write it: no size annotation; the size is the Job's parallelism.
	if _, err := harness.CreateComputeDomain(r.ctx, r.env.CP.Dynamic, r.ns, a.Name, 0); err != nil {
		r.errorf("create ComputeDomain %s: %v", a.Name, err)
		r.cdError(rec, err)
		return
	}
	// The driver emulator creates the channel template; pods created before it would wait for
	// the claim controller's retry backoff.
	for {
		_, err := r.c.ResourceV1().ResourceClaimTemplates(r.ns).Get(r.ctx, a.Name+"-channel", metav1.GetOptions{})
		if err == nil {
			break
		}
		if r.isEnded() || r.ctx.Err() != nil || time.Since(rec.created) > 30*time.Second {
			r.errorf("template of %s: %v", a.Name, err)
			r.cdError(rec, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.isEnded() {
		return
	}
	job := harness.DomainJob(r.ns, a.Name, a.Name, harness.JobSpec{Parallelism: a.Size, Completions: a.Size, GPUs: gpusPerTray}, r.cfg.Profile)
	r.withDeadline(&job.Spec.Template.Spec, a.Lifetime)
	if _, err := r.c.BatchV1().Jobs(r.ns).Create(r.ctx, job, metav1.CreateOptions{}); err != nil {
		r.errorf("create Job %s: %v", a.Name, err)
		r.cdError(rec, err)
	}
}

func (r *runner) cdError(rec *cdRec, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.err == "" && !r.ended {
		rec.err = err.Error()
	}
}

func (r *runner) arrivePlain(a PlainArrival) {
	rec := &plainRec{PlainArrival: a}
	r.mu.Lock()
	rec.created = time.Now()
	r.plain[a.Name] = rec
	r.plainOrder = append(r.plainOrder, rec)
	r.mu.Unlock()
	pod := harness.GPUPod(r.ns, a.Name, gpusPerTray, r.cfg.Profile)
	r.withDeadline(&pod.Spec, a.Lifetime)
	if _, err := r.c.CoreV1().Pods(r.ns).Create(r.ctx, pod, metav1.CreateOptions{}); err != nil {
		r.errorf("create pod %s: %v", a.Name, err)
		r.mu.Lock()
		rec.err = err.Error()
		r.mu.Unlock()
	}
}

// departCD ends a domain that ran its lifetime: its Job is deleted as a user does (`kubectl
// delete job`: the pods go with it), then the ComputeDomain.
func (r *runner) departCD(rec *cdRec) {
	if !r.depart(&rec.departed, &rec.completed, &rec.departedAt) {
		return
	}
	if err := harness.DeleteJob(r.ctx, r.c, r.ns, rec.Name); err != nil {
		r.errorf("delete Job %s: %v", rec.Name, err)
	}
	err := r.env.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(r.ns).Delete(r.ctx, rec.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.errorf("delete ComputeDomain %s: %v", rec.Name, err)
	}
}

// depart marks a domain or plain pod departed and completed, once: false when it already was.
func (r *runner) depart(departed, completed *bool, at *time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if *departed {
		return false
	}
	*departed, *completed, *at = true, true, time.Now()
	return true
}

func (r *runner) departPlain(rec *plainRec) {
	if !r.depart(&rec.departed, &rec.completed, &rec.departedAt) {
		return
	}
	if err := r.c.CoreV1().Pods(r.ns).Delete(r.ctx, rec.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.errorf("delete pod %s: %v", rec.Name, err)
	}
}

// failTray plays a hardware failure: the Node and its ResourceSlices go, the pods on it are
// removed (the pod garbage collector's part); the domain's Job creates a replacement for each lost
// pod, after the Job controller's failure back-off (10 s, doubling). Lost plain pods end. The
// tray comes back RepairAfter later.
func (r *runner) failTray(f TrayFailure) {
	node := r.fleet.Spec.NodeName(f.Rack, 0, f.Tray)
	r.mu.Lock()
	if !r.healthy[node] {
		r.mu.Unlock()
		return
	}
	r.healthy[node] = false
	fr := &failureRec{Node: node, Clique: r.fleet.CliqueOf[node], At: r.since(time.Now()), LostPods: []string{}}
	r.failures = append(r.failures, fr)
	r.mu.Unlock()
	if err := harness.FailNode(r.ctx, r.c, node); err != nil {
		r.errorf("fail tray %s: %v", node, err)
	}
	r.evict(node, fr)
	// A pod the scheduler was binding while the node went away lands there a moment later.
	r.after(2*time.Second, func() { r.evict(node, fr) })
	r.after(r.real(f.RepairAfter), func() {
		if err := harness.RecreateNode(r.ctx, r.c, r.fleet, node); err != nil {
			r.errorf("repair tray %s: %v", node, err)
			return
		}
		r.mu.Lock()
		r.healthy[node] = true
		fr.RepairedAt = ptr.To(r.since(time.Now()))
		r.mu.Unlock()
	})
}

func (r *runner) evict(node string, fr *failureRec) {
	pods, err := r.pods.Pods(r.ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil {
			continue
		}
		err := r.c.CoreV1().Pods(r.ns).Delete(r.ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID},
		})
		if err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				r.errorf("delete pod %s on failed tray %s: %v", p.Name, node, err)
			}
			continue
		}
		cd := p.Labels[harness.DomainLabel]
		r.mu.Lock()
		fr.LostPods = append(fr.LostPods, p.Name)
		if cd == "" {
			if rec := r.plain[p.Name]; rec != nil && !rec.departed {
				rec.departed, rec.killed, rec.departedAt = true, true, time.Now()
			}
			r.mu.Unlock()
			continue
		}
		// The domain's Job replaces the pod; the run counts it.
		if rec := r.cds[cd]; rec != nil && !rec.departed && !r.ended {
			rec.replacements++
			if rec.waitingSince.IsZero() {
				rec.waitingSince = time.Now()
			}
		}
		r.mu.Unlock()
	}
}

// withdraw deletes everything the trace left behind (domains that never started, partly placed
// ones, the running ones) and waits for the namespace to be empty.
func (r *runner) withdraw() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := harness.DeleteWorkloads(ctx, r.c, r.env.CP.Dynamic, r.ns); err != nil {
		return err
	}
	if err := r.c.CoreV1().Pods(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := r.env.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	for {
		pods, err := r.c.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods left in %s", len(pods.Items), r.ns)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
