// Package cdplace is the cgo wrapper around libcdplace_host (include/cdplace.h): it loads the
// policy component into wasmtime and keeps the cluster view the policy decides on. Errors map to
// sentinels for errors.Is; a guest trap, timeout or memory exhaustion is an error value, never a
// crash of the scheduler.
package cdplace

/*
#cgo CFLAGS: -I${SRCDIR}/../../../lib/include
#cgo LDFLAGS: ${SRCDIR}/../../../../target/release/libcdplace_host.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
#include <stdlib.h>
#include "cdplace.h"
*/
import "C"

import (
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// GuestWasm is the policy component built by `make guest`, embedded so the scheduler binary is
// self-contained.
//
//go:embed guest/cdplace_guest.wasm
var GuestWasm []byte

// Sentinel errors, one per CDPLACE_ERROR_* kind.
var (
	ErrLoad          = errors.New("cdplace: component could not be loaded")
	ErrTrap          = errors.New("cdplace: guest trapped")
	ErrTimeout       = errors.New("cdplace: guest exceeded its deadline")
	ErrOutOfMemory   = errors.New("cdplace: guest exceeded its memory limit")
	ErrInvalidArgs   = errors.New("cdplace: invalid plugin args")
	ErrInvalidObject = errors.New("cdplace: invalid object")
	ErrInvalidInput  = errors.New("cdplace: guest rejected its input")
	ErrUnknownPod    = errors.New("cdplace: pod not in the cluster view")
	ErrPanic         = errors.New("cdplace: library panicked")
	ErrBadCall       = errors.New("cdplace: bad call")
)

var kinds = map[C.int32_t]error{
	C.CDPLACE_ERROR_LOAD:           ErrLoad,
	C.CDPLACE_ERROR_TRAP:           ErrTrap,
	C.CDPLACE_ERROR_TIMEOUT:        ErrTimeout,
	C.CDPLACE_ERROR_OUT_OF_MEMORY:  ErrOutOfMemory,
	C.CDPLACE_ERROR_INVALID_ARGS:   ErrInvalidArgs,
	C.CDPLACE_ERROR_INVALID_OBJECT: ErrInvalidObject,
	C.CDPLACE_ERROR_INVALID_INPUT:  ErrInvalidInput,
	C.CDPLACE_ERROR_UNKNOWN_POD:    ErrUnknownPod,
	C.CDPLACE_ERROR_PANIC:          ErrPanic,
	C.CDPLACE_ERROR_BAD_CALL:       ErrBadCall,
}

// Error is a failure reported by the library: Kind is one of the sentinels, Message its text.
type Error struct {
	Kind    error
	Message string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

// IsGuestFailure reports whether err means the guest itself failed (trap, timeout, memory).
func IsGuestFailure(err error) bool {
	return errors.Is(err, ErrTrap) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrOutOfMemory)
}

// take converts and frees an owned error pointer.
func take(e *C.cdplace_error_t) error {
	if e == nil {
		return nil
	}
	defer C.cdplace_error_delete(e)
	n := C.cdplace_error_message(e, nil, 0)
	buf := make([]byte, int(n))
	if n > 0 {
		C.cdplace_error_message(e, (*C.uint8_t)(unsafe.Pointer(&buf[0])), n)
	}
	kind, ok := kinds[C.cdplace_error_kind(e)]
	if !ok {
		kind = ErrBadCall
	}
	return &Error{Kind: kind, Message: string(buf)}
}

// str passes a Go string to C without copying; C only borrows it for the call.
func str(s string) (*C.char, C.size_t) {
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

func bytesOf(b []byte) (*C.char, C.size_t) {
	return (*C.char)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
}

func takeBytes(b *C.cdplace_bytes_t) []byte {
	defer C.cdplace_bytes_delete(b)
	return C.GoBytes(unsafe.Pointer(b.data), C.int(b.len))
}

// Runtime is the compiled policy component; safe for concurrent use.
type Runtime struct {
	ptr *C.cdplace_runtime_t
}

// NewRuntime compiles a component. Zero memoryBytes or deadline mean the library defaults.
func NewRuntime(wasm []byte, memoryBytes uint64, deadline time.Duration) (*Runtime, error) {
	if len(wasm) == 0 {
		return nil, &Error{Kind: ErrLoad, Message: "empty component"}
	}
	var out *C.cdplace_runtime_t
	p, n := bytesOf(wasm)
	err := take(C.cdplace_runtime_new((*C.uint8_t)(unsafe.Pointer(p)), n, C.uint64_t(memoryBytes), C.uint64_t(deadline.Milliseconds()), &out))
	runtime.KeepAlive(wasm)
	if err != nil {
		return nil, err
	}
	r := &Runtime{ptr: out}
	runtime.SetFinalizer(r, func(r *Runtime) { C.cdplace_runtime_delete(r.ptr) })
	return r, nil
}

// Cluster is the cluster view and the policy instances deciding on it; safe for concurrent use.
type Cluster struct {
	ptr *C.cdplace_cluster_t
	rt  *Runtime // keeps the runtime alive
}

// NewCluster makes a cluster view under the plugin arguments (JSON); invalid arguments give an
// error wrapping ErrInvalidArgs with the policy's exact message.
func NewCluster(rt *Runtime, args []byte) (*Cluster, error) {
	var out *C.cdplace_cluster_t
	p, n := bytesOf(args)
	if err := take(C.cdplace_cluster_new(rt.ptr, p, n, &out)); err != nil {
		return nil, err
	}
	return newCluster(out, rt), nil
}

// NewNativeCluster is NewCluster with the policy compiled into the library (comparisons only).
func NewNativeCluster(args []byte) (*Cluster, error) {
	var out *C.cdplace_cluster_t
	p, n := bytesOf(args)
	if err := take(C.cdplace_cluster_new_native(p, n, &out)); err != nil {
		return nil, err
	}
	return newCluster(out, nil), nil
}

func newCluster(ptr *C.cdplace_cluster_t, rt *Runtime) *Cluster {
	c := &Cluster{ptr: ptr, rt: rt}
	runtime.SetFinalizer(c, func(c *Cluster) { C.cdplace_cluster_delete(c.ptr) })
	return c
}

// Keys are the names the validated arguments configure.
type Keys struct {
	CliqueLabel         string `json:"cliqueLabel"`
	GPUResourceName     string `json:"gpuResourceName"`
	GPUDriver           string `json:"gpuDriver"`
	ComputeDomainDriver string `json:"computeDomainDriver"`
	SizeAnnotation      string `json:"sizeAnnotation"`
}

// Keys returns the extraction keys of the validated arguments.
func (c *Cluster) Keys() (Keys, error) {
	var out C.cdplace_bytes_t
	if err := take(C.cdplace_cluster_keys(c.ptr, &out)); err != nil {
		return Keys{}, err
	}
	var k Keys
	err := json.Unmarshal(takeBytes(&out), &k)
	runtime.KeepAlive(c)
	return k, err
}

// Apply adds or updates an object given as JSON with apiVersion and kind. It reports whether
// cdplace reads that kind.
func (c *Cluster) Apply(obj []byte) (bool, error) {
	var read C.bool
	p, n := bytesOf(obj)
	err := take(C.cdplace_cluster_apply(c.ptr, p, n, &read))
	runtime.KeepAlive(obj)
	runtime.KeepAlive(c)
	return bool(read), err
}

// Remove deletes an object by kind ("Pod", "Node", ...), namespace and name.
func (c *Cluster) Remove(kind, namespace, name string) error {
	kp, kn := str(kind)
	np, nn := str(namespace)
	p, n := str(name)
	err := take(C.cdplace_cluster_remove(c.ptr, kp, kn, np, nn, p, n))
	runtime.KeepAlive(c)
	return err
}

// Assume counts a pod on a node at once (Reserve).
func (c *Cluster) Assume(namespace, name, node string) error {
	np, nn := str(namespace)
	p, n := str(name)
	xp, xn := str(node)
	err := take(C.cdplace_cluster_assume(c.ptr, np, nn, p, n, xp, xn))
	runtime.KeepAlive(c)
	return err
}

// Forget drops an assumption (Unreserve).
func (c *Cluster) Forget(namespace, name string) error {
	np, nn := str(namespace)
	p, n := str(name)
	err := take(C.cdplace_cluster_forget(c.ptr, np, nn, p, n))
	runtime.KeepAlive(c)
	return err
}

// Overlay is a hypothetical change for one PreFilter evaluation (preemption's AddPod/RemovePod).
type Overlay struct {
	Op        string `json:"op"` // "add" or "remove"
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node,omitempty"`
}

// Verdict is a status code name ("Success", "Skip", "Unschedulable",
// "UnschedulableAndUnresolvable", "Error") with its reason, and a score for cliques.
type Verdict struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
	Score  int64  `json:"score"`
}

// Decision is what PreFilter decided; Filter and Score are lookups (Node).
type Decision struct {
	Status       Verdict            `json:"status"`
	Domain       *string            `json:"domain"`
	Exclusive    bool               `json:"exclusive"`
	Cliques      map[string]Verdict `json:"cliques"`
	Other        Verdict            `json:"other"`
	Nodes        map[string]Verdict `json:"nodes"`
	AllowedNodes []string           `json:"allowedNodes"`
}

// Node returns Filter's verdict for a node with this name and clique label value (empty when
// the node has none), and whether it has a score (the verdict's Score field).
func (d *Decision) Node(name, clique string) (Verdict, bool) {
	if d.Status.Code != "Success" {
		return d.Status, false
	}
	c, inClique := d.Cliques[clique]
	if v, ok := d.Nodes[name]; ok {
		if v.Code == "Success" && inClique {
			v.Score = c.Score
			return v, true
		}
		return v, false
	}
	if inClique {
		return c, c.Code == "Success"
	}
	return d.Other, false
}

func (c *Cluster) call(namespace, name string, overlay []Overlay, packed bool) ([]byte, error) {
	var ov []byte
	if len(overlay) > 0 {
		var err error
		if ov, err = json.Marshal(overlay); err != nil {
			return nil, err
		}
	}
	np, nn := str(namespace)
	p, n := str(name)
	op, on := bytesOf(ov)
	var out C.cdplace_bytes_t
	var e *C.cdplace_error_t
	if packed {
		e = C.cdplace_cluster_pre_filter_packed(c.ptr, np, nn, p, n, op, on, &out)
	} else {
		e = C.cdplace_cluster_pre_filter(c.ptr, np, nn, p, n, op, on, &out)
	}
	runtime.KeepAlive(ov)
	runtime.KeepAlive(c)
	if err := take(e); err != nil {
		return nil, err
	}
	return takeBytes(&out), nil
}

// PreFilter decides where the pod may go, as if overlay were applied.
func (c *Cluster) PreFilter(namespace, name string, overlay []Overlay) (*Decision, error) {
	b, err := c.call(namespace, name, overlay, true)
	if err != nil {
		return nil, err
	}
	return unpack(b)
}

// PreFilterJSON is PreFilter through the JSON form of the decision (tests compare the two).
func (c *Cluster) PreFilterJSON(namespace, name string, overlay []Overlay) (*Decision, error) {
	b, err := c.call(namespace, name, overlay, false)
	if err != nil {
		return nil, err
	}
	d := &Decision{}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("cdplace: decoding decision: %w", err)
	}
	return d, nil
}

var codeNames = [...]string{"Success", "Skip", "Unschedulable", "UnschedulableAndUnresolvable", "Error"}

// reader decodes the packed decision of include/cdplace.h.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errors.New("cdplace: truncated or malformed packed decision")
	}
	r.b = nil
}

func (r *reader) u8() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) str() string {
	n := r.u32()
	if uint32(len(r.b)) < n {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) verdict(reasons []string) Verdict {
	code, reason := r.u8(), r.u32()
	if int(code) >= len(codeNames) || int(reason) >= len(reasons) {
		r.fail()
		return Verdict{Code: "Error"}
	}
	return Verdict{Code: codeNames[code], Reason: reasons[reason]}
}

func unpack(b []byte) (*Decision, error) {
	if len(b) < 4 || string(b[:4]) != "CDP1" {
		return nil, errors.New("cdplace: packed decision has no CDP1 header")
	}
	r := &reader{b: b[4:]}
	reasons := make([]string, r.u32())
	for i := range reasons {
		reasons[i] = r.str()
	}
	d := &Decision{Status: r.verdict(reasons)}
	if r.u8() == 1 {
		dom := r.str()
		d.Domain = &dom
	}
	d.Exclusive = r.u8() == 1
	d.Other = r.verdict(reasons)
	n := r.u32()
	d.Cliques = make(map[string]Verdict, min(n, 1<<16))
	for i := uint32(0); i < n && r.err == nil; i++ {
		label := r.str()
		v := r.verdict(reasons)
		v.Score = int64(r.u32())
		d.Cliques[label] = v
	}
	n = r.u32()
	d.Nodes = make(map[string]Verdict, min(n, 1<<16))
	for i := uint32(0); i < n && r.err == nil; i++ {
		name := r.str()
		d.Nodes[name] = r.verdict(reasons)
	}
	n = r.u32()
	if d.Exclusive && n > 0 {
		d.AllowedNodes = make([]string, 0, min(n, 1<<16))
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		d.AllowedNodes = append(d.AllowedNodes, r.str())
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	return d, r.err
}
