package owners

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// The CRDs read without their Go modules, through dynamic informers started once discovery shows
// them served.
var (
	JobSetGVR          = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	LeaderWorkerSetGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
)

// crdRecheck is how often discovery is asked again for a CRD that was not served; a pod that
// carries a JobSet or LeaderWorkerSet label asks sooner (labelRecheck), since its CRD was most
// likely installed just before it.
const (
	crdRecheck   = 30 * time.Second
	labelRecheck = time.Second
)

// Resolver answers "which owner does this pod count toward, and how large is it" from the
// scheduler's informers (Jobs, StatefulSets, ReplicaSets) and dynamic informers for JobSets and
// LeaderWorkerSets. OnChange hears the key of every owner object that is added, changed or
// deleted, so the feed can send the new size when a pod it sent names that owner. Safe for
// concurrent use.
type Resolver struct {
	jobs      batchlisters.JobLister
	sets      appslisters.StatefulSetLister
	replicas  appslisters.ReplicaSetLister
	typed     []cache.ResourceEventHandlerRegistration
	onChange  func(key string)
	logger    klog.Logger
	dynClient dynamic.Interface
	disc      discovery.DiscoveryInterface

	ctx    context.Context
	mu     sync.RWMutex
	crds   map[string]*crdInformer // by kind
	nextAt time.Time
	lastAt time.Time
}

type crdInformer struct {
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// New registers the typed informers on the scheduler's factory (they start with it) and looks for
// the JobSet and LeaderWorkerSet CRDs. dyn and disc may be nil (tests): those kinds are then
// never read, and their pods count toward their direct controller.
func New(ctx context.Context, f informers.SharedInformerFactory, dyn dynamic.Interface, disc discovery.DiscoveryInterface, onChange func(key string)) (*Resolver, error) {
	r := &Resolver{
		jobs:      f.Batch().V1().Jobs().Lister(),
		sets:      f.Apps().V1().StatefulSets().Lister(),
		replicas:  f.Apps().V1().ReplicaSets().Lister(),
		onChange:  onChange,
		logger:    klog.FromContext(ctx),
		dynClient: dyn,
		disc:      disc,
		crds:      map[string]*crdInformer{},
		ctx:       ctx,
	}
	for _, t := range []struct {
		inf  cache.SharedIndexInformer
		kind string
	}{
		{f.Batch().V1().Jobs().Informer(), KindJob},
		{f.Apps().V1().StatefulSets().Informer(), KindStatefulSet},
		{f.Apps().V1().ReplicaSets().Informer(), KindReplicaSet},
	} {
		reg, err := t.inf.AddEventHandler(r.handler(t.kind))
		if err != nil {
			return nil, fmt.Errorf("watching %ss: %w", t.kind, err)
		}
		r.typed = append(r.typed, reg)
	}
	r.lookForCRDs(ctx)
	return r, nil
}

func (r *Resolver) handler(kind string) cache.ResourceEventHandlerFuncs {
	notify := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(interface {
			GetNamespace() string
			GetName() string
		})
		if ok && r.onChange != nil {
			r.onChange(Key(kind, m.GetNamespace(), m.GetName()))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}
}

// Recheck asks discovery again for CRDs not yet served, at most every crdRecheck; the plugin
// calls it when a ComputeDomain pod arrives, so a JobSet CRD installed later is picked up.
func (r *Resolver) Recheck(ctx context.Context) {
	r.mu.RLock()
	due := time.Now().After(r.nextAt) && len(r.crds) < 2
	r.mu.RUnlock()
	if due {
		r.lookForCRDs(ctx)
	}
}

func (r *Resolver) lookForCRDs(ctx context.Context) {
	r.mu.Lock()
	r.lastAt = time.Now()
	r.nextAt = r.lastAt.Add(crdRecheck)
	r.mu.Unlock()
	if r.dynClient == nil || r.disc == nil {
		return
	}
	for kind, gvr := range map[string]schema.GroupVersionResource{KindJobSet: JobSetGVR, KindLeaderWorkerSet: LeaderWorkerSetGVR} {
		r.mu.RLock()
		_, started := r.crds[kind]
		r.mu.RUnlock()
		if started || !served(r.disc, gvr) {
			continue
		}
		factory := dynamicinformer.NewDynamicSharedInformerFactory(r.dynClient, 0)
		inf := factory.ForResource(gvr).Informer()
		reg, err := inf.AddEventHandler(r.handler(kind))
		if err != nil {
			r.logger.Error(err, "ComputeDomainPlacement: cannot watch workload owners", "resource", gvr.String())
			continue
		}
		factory.Start(ctx.Done())
		r.mu.Lock()
		r.crds[kind] = &crdInformer{gvr: gvr, informer: inf, reg: reg}
		r.mu.Unlock()
		r.logger.V(2).Info("ComputeDomainPlacement: reading workload sizes", "resource", gvr.String())
	}
}

// served reports whether discovery lists the resource; errors count as not served.
func served(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, res := range list.APIResources {
		if res.Name == gvr.Resource {
			return true
		}
	}
	return false
}

// Served reports whether pods of this kind's workloads are resolved to it: always for the
// built-in kinds; for JobSet and LeaderWorkerSet once discovery showed the CRD and its informer
// started. Until that informer has synced, Fact answers ErrUnknownOwner, so the domain waits for
// the size rather than start with its Jobs' sizes.
func (r *Resolver) Served(kind string) bool {
	switch kind {
	case KindJob, KindStatefulSet, KindReplicaSet:
		return true
	}
	r.mu.RLock()
	c, due := r.crds[kind], time.Since(r.lastAt) >= labelRecheck
	r.mu.RUnlock()
	if c == nil && due {
		// A pod labelled for this kind: its CRD was most likely installed just now.
		r.lookForCRDs(r.ctx)
		r.mu.RLock()
		c = r.crds[kind]
		r.mu.RUnlock()
	}
	return c != nil
}

// HasSynced reports whether the typed informers have delivered their initial lists.
func (r *Resolver) HasSynced() bool {
	for _, reg := range r.typed {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

// KeyOf is the package's KeyOf with this resolver's view of which CRDs are served.
func (r *Resolver) KeyOf(pod *v1.Pod) string { return KeyOf(pod, r.Served) }

// ErrUnknownOwner means the owner object is not in the informer cache (not created yet, deleted,
// or the informer lags): its pods' domain waits rather than start with a guessed size.
var ErrUnknownOwner = errors.New("owner not in the scheduler's cache")

// Fact reads the owner's size. An error wrapping ErrUnknownOwner means no such object is cached;
// any other error means the object cannot be read (a malformed custom resource).
func (r *Resolver) Fact(key string) (Fact, error) {
	kind, ns, name, ok := SplitKey(key)
	if !ok {
		return Fact{}, fmt.Errorf("malformed owner key %q", key)
	}
	var err error
	switch kind {
	case KindJob:
		var j *batchv1.Job
		if j, err = r.jobs.Jobs(ns).Get(name); err == nil {
			return JobSize(j), nil
		}
	case KindStatefulSet:
		var s *appsv1.StatefulSet
		if s, err = r.sets.StatefulSets(ns).Get(name); err == nil {
			return StatefulSetSize(s), nil
		}
	case KindReplicaSet:
		var rs *appsv1.ReplicaSet
		if rs, err = r.replicas.ReplicaSets(ns).Get(name); err == nil {
			return ReplicaSetSize(rs), nil
		}
	case KindJobSet, KindLeaderWorkerSet:
		r.mu.RLock()
		c := r.crds[kind]
		r.mu.RUnlock()
		if c == nil {
			return Fact{}, fmt.Errorf("%s %s/%s: %w (the %s API is not served)", kind, ns, name, ErrUnknownOwner, kind)
		}
		obj, exists, gerr := c.informer.GetStore().GetByKey(ns + "/" + name)
		if gerr != nil || !exists {
			return Fact{}, fmt.Errorf("%s %s/%s: %w", kind, ns, name, ErrUnknownOwner)
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return Fact{}, fmt.Errorf("%s %s/%s: unexpected %T in the cache", kind, ns, name, obj)
		}
		if kind == KindJobSet {
			return JobSetSize(u)
		}
		return LeaderWorkerSetSize(u)
	default:
		return Fact{}, fmt.Errorf("owner kind %q is not read", kind)
	}
	if apierrors.IsNotFound(err) {
		return Fact{}, fmt.Errorf("%s %s/%s: %w", kind, ns, name, ErrUnknownOwner)
	}
	return Fact{}, err
}
