package computedomain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// Where the policy comes from, and replacing it while the scheduler runs (issue 35).
//
// The args' `policy` object names the source; the host validates it (never the policy: a
// user-written policy must not be the validator of host fields), and the args the policy sees
// go without it:
//
//	policy: {source: embedded}                          the component built into the binary (default)
//	policy: {source: file, path: /etc/cdplace/policy.wasm}
//	policy: {source: configMap, namespace: N, name: M, key: K}   binaryData[K] of that ConfigMap
//	policy: {source: secret, namespace: N, name: M, key: K}      data[K] of that Secret
//
// `guestPath: P` is the file source's shorthand (`{source: file, path: P}`); setting both is an
// error. A file is polled every policyPollInterval (a mounted ConfigMap is replaced by kubelet
// through a symlink swap, which a stat of the path sees); a ConfigMap is watched by an informer
// on that one object. Each change is read and digested (sha256); content equal to the live
// policy's is skipped; anything else is compiled, checked and swapped in by one background
// goroutine, one swap at a time, the latest content winning (cdplace.Cluster.Swap: instantiate,
// configure, settings, self-test on the live view). A ConfigMap source starts on the embedded
// policy and swaps to the ConfigMap's as soon as the informer delivers it; a file source starts
// on the file (the plugin fails to start if it cannot be read or compiled, as guestPath did).
//
// Outcomes: cdplace_policy_swaps_total{result="applied"|"refused",reason}, the live policy as
// cdplace_policy_info{digest,source,generation} 1, and on a ConfigMap a Normal PolicyApplied or a
// Warning PolicyRefused Event (message: the check's error); a file's outcome is logged.
//
// Which generation decides what: PreFilter's decision carries the generation that made it
// (cdplace.Decision.Generation) into the cycle state, and Filter, Score and PreScore of that
// cycle read only that decision. Reserve and Unreserve change the view, never ask the policy.
// PreFilter's AddPod/RemovePod (preemption's what-ifs) and PostFilter's gang preemption ask the
// policy again: they are decided by the generation live at that moment, which after a swap
// mid-cycle is the new one (the cycle's decision is replaced by AddPod/RemovePod's).

// The policy sources.
const (
	policyEmbedded  = "embedded"
	policyFile      = "file"
	policyConfigMap = "configMap"
	policySecret    = "secret"
)

// Event reasons on the policy's ConfigMap.
const (
	policyAppliedReason  = "PolicyApplied"
	policyRefusedReason  = "PolicyRefused"
	policyRevertedReason = "PolicyReverted"
)

// policyEvents records a swapper's outcome on regarding (the source's ConfigMap): a Normal
// PolicyApplied or a Warning PolicyRefused Event.
func policyEvents(rec events.EventRecorder) func(regarding runtime.Object, applied bool, note string) {
	return func(regarding runtime.Object, applied bool, note string) {
		reason, eventType := policyRefusedReason, v1.EventTypeWarning
		if applied {
			reason, eventType = policyAppliedReason, v1.EventTypeNormal
		}
		rec.Eventf(regarding, nil, eventType, reason, "Scheduling", "%s", note)
	}
}

// revertEvents records a revert on regarding (the source's ConfigMap): a Warning PolicyReverted
// Event.
func revertEvents(rec events.EventRecorder) func(regarding runtime.Object, note string) {
	return func(regarding runtime.Object, note string) {
		rec.Eventf(regarding, nil, v1.EventTypeWarning, policyRevertedReason, "Scheduling", "%s", note)
	}
}

// revert restores the generation before the live one (see revert.go), through the same checks
// as any swap, off the caller's goroutine; false when there is none to restore.
func (s *swapper) revert(cause string) bool {
	s.mu.Lock()
	prev, prevAt, bad, regarding, origin := s.previous, s.previousAt, s.live, s.regarding, s.origin
	s.mu.Unlock()
	if prev == nil {
		s.logger.Error(nil, "ComputeDomainPlacement: the live "+s.role+"'s answers keep being refused, and there is no generation before it to revert to; it keeps deciding and its pods fail closed",
			"digest", bad, "cause", cause)
		return false
	}
	s.offer(policyCandidate{wasm: prev, origin: "the generation before " + bad + " (" + prevAt + ", " + origin + ")", regarding: regarding,
		revert: &revertCause{bad: bad, cause: cause}})
	return true
}

// policyPollInterval is how often a file source is looked at (tests shorten it).
var policyPollInterval = 2 * time.Second

// PolicySource is the args' `policy` object.
type PolicySource struct {
	Source    string `json:"source"`
	Path      string `json:"path,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Key       string `json:"key,omitempty"`
	// at is the field that named it (policy, or guestPath), for messages.
	at *field.Path
}

// String names the source as logs and metrics say it.
func (s PolicySource) String() string {
	switch s.Source {
	case policyFile:
		return "file " + s.Path
	case policyConfigMap:
		return "ConfigMap " + s.Namespace + "/" + s.Name + " key " + s.Key
	case policySecret:
		return "Secret " + s.Namespace + "/" + s.Name + " key " + s.Key
	}
	return policyEmbedded
}

// parsePolicy reads and validates the policy source of the args (a JSON object) and returns
// the args the policy validates: without `policy`, and without `guestPath` (the host's too).
func parsePolicy(args []byte) (PolicySource, []byte, field.ErrorList) {
	src, _, rest, errs := parseSources(args)
	return src, rest, errs
}

// parseSources is parsePolicy with the shadow policy's source too (`shadowPolicy`, the same
// object as `policy`; nil when not set), also taken out of the args the policy validates.
func parseSources(args []byte) (PolicySource, *PolicySource, []byte, field.ErrorList) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(args, &all); err != nil {
		return PolicySource{}, nil, nil, field.ErrorList{field.Invalid(argsPath, string(args), err.Error())}
	}
	p := argsPath.Child("policy")
	var errs field.ErrorList
	src := PolicySource{Source: policyEmbedded, at: p}
	rawPolicy, hasPolicy := all["policy"]
	rawPath, hasPath := all["guestPath"]
	rawShadow, hasShadow := all["shadowPolicy"]
	delete(all, "policy")
	delete(all, "guestPath")
	delete(all, "shadowPolicy")
	var shadow *PolicySource
	if hasShadow && !bytes.Equal(bytes.TrimSpace(rawShadow), []byte("null")) {
		sp := argsPath.Child("shadowPolicy")
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(rawShadow, &obj); err != nil || obj == nil {
			errs = append(errs, field.Invalid(sp, string(rawShadow), "must be an object: {source: embedded|file|configMap|secret, ...}"))
		} else {
			var sh PolicySource
			sh, errs = policyObject(sp, obj, errs)
			shadow = &sh
		}
	}
	if hasPath && !bytes.Equal(bytes.TrimSpace(rawPath), []byte("null")) {
		var path string
		if err := json.Unmarshal(rawPath, &path); err != nil {
			errs = append(errs, field.Invalid(argsPath.Child("guestPath"), string(rawPath), "must be a string"))
		} else if hasPolicy {
			errs = append(errs, field.Forbidden(argsPath.Child("guestPath"), "set policy or guestPath, not both (guestPath is short for policy {source: file, path: ...})"))
		} else {
			src = PolicySource{Source: policyFile, Path: path, at: argsPath.Child("guestPath")}
			if !filepath.IsAbs(path) {
				errs = append(errs, field.Invalid(argsPath.Child("guestPath"), path, "must be an absolute path"))
			}
		}
	}
	if hasPolicy {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(rawPolicy, &obj); err != nil || obj == nil {
			errs = append(errs, field.Invalid(p, string(rawPolicy), "must be an object: {source: embedded|file|configMap|secret, ...}"))
		} else {
			src, errs = policyObject(p, obj, errs)
		}
	}
	rest, err := json.Marshal(all)
	if err != nil {
		errs = append(errs, field.InternalError(argsPath, err))
	}
	return src, shadow, rest, errs
}

func policyObject(p *field.Path, obj map[string]json.RawMessage, errs field.ErrorList) (PolicySource, field.ErrorList) {
	known := []string{"source", "path", "namespace", "name", "key"}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	str := func(k string) string {
		raw, ok := obj[k]
		if !ok {
			return ""
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			errs = append(errs, field.Invalid(p.Child(k), string(raw), "must be a string"))
		}
		return s
	}
	for _, k := range keys {
		if !contains(known, k) {
			errs = append(errs, field.NotSupported(p, k, known))
		}
	}
	src := PolicySource{Source: str("source"), Path: str("path"), Namespace: str("namespace"), Name: str("name"), Key: str("key"), at: p.Child("path")}
	only := func(allowed ...string) {
		for _, k := range keys {
			if contains(known, k) && k != "source" && !contains(allowed, k) {
				errs = append(errs, field.Forbidden(p.Child(k), "not used with source "+src.Source))
			}
		}
	}
	switch src.Source {
	case "":
		errs = append(errs, field.Required(p.Child("source"), "one of embedded, file, configMap, secret"))
	case policyEmbedded:
		only()
	case policyFile:
		only("path")
		if src.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), "the component file to load"))
		} else if !filepath.IsAbs(src.Path) {
			errs = append(errs, field.Invalid(p.Child("path"), src.Path, "must be an absolute path"))
		}
	case policyConfigMap, policySecret:
		only("namespace", "name", "key")
		for _, f := range []struct {
			name, value string
			check       func(string) []string
		}{
			{"namespace", src.Namespace, validation.IsDNS1123Label},
			{"name", src.Name, validation.IsDNS1123Subdomain},
			{"key", src.Key, validation.IsConfigMapKey},
		} {
			if f.value == "" {
				errs = append(errs, field.Required(p.Child(f.name), ""))
				continue
			}
			for _, msg := range f.check(f.value) {
				errs = append(errs, field.Invalid(p.Child(f.name), f.value, msg))
			}
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("source"), src.Source, []string{policyEmbedded, policyFile, policyConfigMap, policySecret}))
	}
	return src, errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// digestOf is a component's sha256, as the metrics and Events name it.
func digestOf(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// policyCandidate is content a source offered.
type policyCandidate struct {
	wasm []byte
	// origin says where it came from, for messages.
	origin string
	// regarding is the object Events go on (the ConfigMap); nil for a file.
	regarding runtime.Object
	// revert: this is the generation before the live one, restored because the live one's
	// answers kept being refused (revert.go); nil for content a source offered.
	revert *revertCause
}

// revertCause is why a revert was asked for.
type revertCause struct {
	// bad is the digest of the policy reverted from; cause says why.
	bad, cause string
}

// swapper replaces the cluster's policy in the background: one goroutine, one swap at a time,
// the latest offered content winning.
type swapper struct {
	cluster *cdplace.Cluster
	source  PolicySource
	logger  klog.Logger
	// role is what it replaces in messages ("policy" or "shadow policy"); install checks and
	// installs a compiled candidate (Cluster.Swap, Cluster.SetShadow); swaps and info are its
	// metrics (policy_swaps_total and policy_info, or the shadow's).
	role    string
	install func(*cdplace.Runtime) (cdplace.SwapReport, error)
	swaps   *metrics.CounterVec
	info    *metrics.GaugeVec
	// event records an Event on regarding (nil: none).
	event func(regarding runtime.Object, applied bool, note string)
	// swapped runs after each applied swap (the plugin drops its cached decisions).
	swapped func()
	// revertEvent records a Warning PolicyReverted Event on regarding (nil: none).
	revertEvent func(regarding runtime.Object, note string)

	mu   sync.Mutex
	next *policyCandidate
	// liveWasm is the live policy's content, previous the content of the generation before it
	// and previousAt where it came from (nil: none, as for the first policy): a revert restores
	// it (revert.go).
	liveWasm, previous []byte
	previousAt         string
	// regarding and origin are those of the last content a source offered (a revert's Events
	// go on the same object).
	regarding runtime.Object
	origin    string
	live      string // the live policy's digest
	refused   string // the last refused digest (not tried again)
	gen       uint64
	kick      chan struct{}
	// done counts the candidates handled (tests wait on it).
	done uint64
}

func newSwapper(c *cdplace.Cluster, src PolicySource, liveDigest string, logger klog.Logger) *swapper {
	s := &swapper{cluster: c, source: src, logger: logger, live: liveDigest, gen: c.PolicyGeneration(), kick: make(chan struct{}, 1),
		role: "policy", install: c.Swap, swaps: policySwaps, info: policyInfo}
	s.info.WithLabelValues(s.live, src.Source, strconv.FormatUint(s.gen, 10)).Set(1)
	return s
}

// newShadowSwapper sets the shadow policy from src whenever it changes, with the same checks
// (Cluster.SetShadow); no shadow decides until the first content passes them.
func newShadowSwapper(c *cdplace.Cluster, src PolicySource, logger klog.Logger) *swapper {
	return &swapper{cluster: c, source: src, logger: logger, kick: make(chan struct{}, 1),
		role: "shadow policy", install: c.SetShadow, swaps: shadowSwaps, info: shadowInfo}
}

// Live is the live policy's digest and generation.
func (s *swapper) Live() (string, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, s.gen
}

func (s *swapper) handled() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// offer hands content to the swapping goroutine; content offered before it got to the last one
// replaces it.
func (s *swapper) offer(c policyCandidate) {
	s.mu.Lock()
	s.next = &c
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *swapper) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		s.mu.Lock()
		c := s.next
		s.next = nil
		s.mu.Unlock()
		if c != nil {
			s.apply(*c)
			s.mu.Lock()
			s.done++
			s.mu.Unlock()
		}
	}
}

// apply compiles, checks and swaps in one candidate (off the scheduling goroutines).
func (s *swapper) apply(c policyCandidate) {
	digest := digestOf(c.wasm)
	s.mu.Lock()
	live, refused, oldGen := s.live, s.refused, s.gen
	s.mu.Unlock()
	if digest == live || digest == refused {
		s.logger.V(2).Info("ComputeDomainPlacement: policy content unchanged; nothing to swap", "from", c.origin, "digest", digest)
		return
	}
	start := time.Now()
	rt, err := cdplace.NewRuntime(c.wasm)
	var report cdplace.SwapReport
	if err == nil {
		report, err = s.install(rt)
	}
	if err != nil {
		check := cdplace.RefusedCheck(err)
		if check == "" {
			check = "other"
		}
		s.swaps.WithLabelValues("refused", check).Inc()
		s.mu.Lock()
		s.refused = digest
		s.mu.Unlock()
		keeps := fmt.Sprintf("generation %d keeps deciding", oldGen)
		if s.role != "policy" {
			keeps = fmt.Sprintf("shadow generation %d stays", oldGen)
			if live == "" {
				keeps = "no shadow runs"
			}
		}
		note := fmt.Sprintf("%s %s from %s refused; %s: %v", s.role, digest, c.origin, keeps, err)
		s.logger.Error(err, "ComputeDomainPlacement: "+s.role+" refused; "+keeps, "from", c.origin, "digest", digest, "check", check)
		if s.event != nil && c.regarding != nil {
			s.event(c.regarding, false, note)
		}
		return
	}
	s.mu.Lock()
	s.live, s.gen, s.refused = digest, report.Generation, ""
	if c.revert != nil {
		// The reverted content stays in its source: not tried again until other content comes.
		s.refused = c.revert.bad
		s.previous, s.previousAt = nil, ""
	} else {
		if s.liveWasm != nil {
			s.previous, s.previousAt = s.liveWasm, live
		}
		s.regarding, s.origin = c.regarding, c.origin
	}
	s.liveWasm = c.wasm
	s.mu.Unlock()
	if live != "" {
		s.info.DeleteLabelValues(live, s.source.Source, strconv.FormatUint(oldGen, 10))
	}
	s.info.WithLabelValues(digest, s.source.Source, strconv.FormatUint(report.Generation, 10)).Set(1)
	s.swaps.WithLabelValues("applied", "passed").Inc()
	if s.role == "policy" {
		// A recorded trace names the policy each later decision is made by.
		s.cluster.RecordPolicy(report.Generation, digest)
	}
	if s.swapped != nil {
		s.swapped()
	}
	took := time.Since(start)
	if c.revert != nil {
		policyReverts.Inc()
		note := fmt.Sprintf("%s %s reverted to generation %d (%s, the one before it): %s", s.role, c.revert.bad, report.Generation, digest, c.revert.cause)
		s.logger.Error(nil, "ComputeDomainPlacement: "+note, "from", c.origin, "took", took)
		if s.revertEvent != nil && c.regarding != nil {
			s.revertEvent(c.regarding, note)
		}
		return
	}
	note := fmt.Sprintf("%s %s from %s is generation %d (self-test: %d pending domains, %d placed pods, %d preemption what-ifs, slowest call %.1f ms: %s; compile and check %s)",
		s.role, digest, c.origin, report.Generation, report.PendingDomains, report.PlacedPods, report.WhatIfs, float64(report.SlowestCallUs)/1000, report.SlowestCall, took.Round(time.Millisecond))
	s.logger.Info("ComputeDomainPlacement: "+s.role+" applied", "from", c.origin, "digest", digest, "generation", report.Generation,
		"pendingDomains", report.PendingDomains, "placedPods", report.PlacedPods, "slowestCallUs", report.SlowestCallUs, "took", took)
	if s.event != nil && c.regarding != nil {
		s.event(c.regarding, true, note)
	}
}

// fileStamp is what a poll compares: a changed file (or a new file behind a symlink swap) has
// another modification time, size or inode.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(fi os.FileInfo) fileStamp {
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = uint64(sys.Ino)
	}
	return st
}

// watchFile polls path every policyPollInterval and offers its content when it changed since
// `last` (the stamp of the content loaded at start).
func (s *swapper) watchFile(ctx context.Context, path string, last fileStamp) {
	t := time.NewTicker(policyPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(path)
		if err != nil {
			s.logger.V(2).Info("ComputeDomainPlacement: policy file not readable; the live policy keeps deciding", "path", path, "err", err)
			continue
		}
		st := stampOf(fi)
		if st == last {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			s.logger.Error(err, "ComputeDomainPlacement: reading the policy file; the live policy keeps deciding", "path", path)
			continue
		}
		last = st
		s.offer(policyCandidate{wasm: b, origin: "file " + path})
	}
}

// watchObject offers the policy in the source's key of one ConfigMap (binaryData) or Secret
// (data) whenever it is added or updated (an informer on that object alone).
func (s *swapper) watchObject(ctx context.Context, cs kubernetes.Interface) {
	src := s.source
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(src.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", src.Name).String()
		}))
	var inf cache.SharedIndexInformer
	kind := "ConfigMap"
	if src.Source == policySecret {
		inf, kind = f.Core().V1().Secrets().Informer(), "Secret"
	} else {
		inf = f.Core().V1().ConfigMaps().Informer()
	}
	origin := src.String()
	seen := func(obj interface{}) {
		var (
			b, text []byte
			found   bool
			where   = "binaryData"
			regard  runtime.Object
			ns      string
		)
		switch o := obj.(type) {
		case *v1.ConfigMap:
			if o.Name != src.Name {
				return
			}
			b, found = o.BinaryData[src.Key]
			if d, ok := o.Data[src.Key]; ok {
				text = []byte(d)
			}
			regard, ns = o, o.Namespace
		case *v1.Secret:
			if o.Name != src.Name {
				return
			}
			b, found = o.Data[src.Key]
			where, regard, ns = "data", o, o.Namespace
		default:
			return
		}
		if !found {
			note := fmt.Sprintf("%s %s/%s has no %s key %q: the %s is not changed", kind, ns, src.Name, where, src.Key, s.role)
			if text != nil {
				note += " (the key is under data: a component is binary, put it under binaryData, e.g. kubectl create configmap --from-file)"
			}
			s.swaps.WithLabelValues("refused", "missing").Inc()
			s.logger.Info("ComputeDomainPlacement: "+note, "source", origin)
			if s.event != nil {
				s.event(regard, false, note)
			}
			return
		}
		s.offer(policyCandidate{wasm: b, origin: origin, regarding: regard})
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj interface{}) { seen(obj) },
		DeleteFunc: func(interface{}) {
			s.logger.Info("ComputeDomainPlacement: the "+s.role+" "+kind+" was deleted; the "+s.role+" is not changed", "source", origin)
		},
	})
	if err != nil {
		s.logger.Error(err, "ComputeDomainPlacement: watching the "+s.role+" "+kind, "source", origin)
		return
	}
	f.Start(ctx.Done())
}
