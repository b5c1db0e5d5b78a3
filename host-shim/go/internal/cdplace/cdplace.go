// Package cdplace is the Go side of the C ABI of libcdplace_host (host-shim/lib/include/cdplace.h):
// it loads the policy component into wasmtime and keeps the cluster view the policy decides
// on. It owns everything that crosses the boundary: the status codes and object kinds
// (mirrored once from the header's enums), the error sentinels (errors.Is), the packed facts
// batch CDF3 (facts.go), the packed overlay and the packed decision CDP4 (decision.go). A guest
// trap, timeout or memory exhaustion is an error value, never a crash of the scheduler.
//
// Every call into C that carries facts or asks the policy is counted (Crossings,
// Cluster.Crossings), so tests can prove what does not cross; the bookkeeping reads after a
// call (Cluster.Stats, Cluster.TakeQuarantined: no facts, no guest call) are not.
package cdplace

/*
// The archive is the release build's (make scheduler), or with the tag cdplace_image (make image)
// one per architecture, built with its paths remapped in a target directory of its own
// (target/image/cargo) so that the normal build's cache stays valid.
#cgo CFLAGS: -I${SRCDIR}/../../../lib/include
#cgo !cdplace_image LDFLAGS: ${SRCDIR}/../../../../target/release/libcdplace_host.a
#cgo cdplace_image,amd64 LDFLAGS: ${SRCDIR}/../../../../target/image/cargo/x86_64-unknown-linux-gnu/release/libcdplace_host.a
#cgo cdplace_image,arm64 LDFLAGS: ${SRCDIR}/../../../../target/image/cargo/aarch64-unknown-linux-gnu/release/libcdplace_host.a
#cgo LDFLAGS: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
#include <stdlib.h>
#include "cdplace.h"
*/
import "C"

import (
	_ "embed"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"
)

// HostLibrary is the start of the SHA-256 of the libcdplace_host.a this binary links, set by the
// Makefile (-ldflags -X). go build and go test key their caches on Go inputs and cgo flags, not
// on the content of an archive the flags name: without it a change to the Rust library alone left
// `go build -o` calling the old binary up to date, and `go test` replaying results of the old
// library. Empty in a binary built without the Makefile.
var HostLibrary string

// GuestWasm is the policy component built by `make guest`, embedded so the scheduler binary is
// self-contained.
//
//go:embed guest/cdplace_guest.wasm
var GuestWasm []byte

// Code is a framework status code as the policy gives it (cdplace_code_t).
type Code uint8

// The codes, from the header.
const (
	CodeSuccess                      Code = C.CDPLACE_CODE_SUCCESS
	CodeSkip                         Code = C.CDPLACE_CODE_SKIP
	CodeUnschedulable                Code = C.CDPLACE_CODE_UNSCHEDULABLE
	CodeUnschedulableAndUnresolvable Code = C.CDPLACE_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
	CodeError                        Code = C.CDPLACE_CODE_ERROR
)

var codeNames = map[Code]string{
	CodeSuccess:                      "Success",
	CodeSkip:                         "Skip",
	CodeUnschedulable:                "Unschedulable",
	CodeUnschedulableAndUnresolvable: "UnschedulableAndUnresolvable",
	CodeError:                        "Error",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Kind is an object kind of a facts record (cdplace_kind_t).
type Kind uint8

// The kinds, from the header.
const (
	KindNode                  Kind = C.CDPLACE_KIND_NODE
	KindPod                   Kind = C.CDPLACE_KIND_POD
	KindResourceClaim         Kind = C.CDPLACE_KIND_RESOURCE_CLAIM
	KindResourceClaimTemplate Kind = C.CDPLACE_KIND_RESOURCE_CLAIM_TEMPLATE
	KindResourceSlice         Kind = C.CDPLACE_KIND_RESOURCE_SLICE
	KindComputeDomain         Kind = C.CDPLACE_KIND_COMPUTE_DOMAIN
	KindPodGroup              Kind = C.CDPLACE_KIND_POD_GROUP
	KindOwner                 Kind = C.CDPLACE_KIND_OWNER
)

var kindNames = map[Kind]string{
	KindNode: "Node", KindPod: "Pod", KindResourceClaim: "ResourceClaim",
	KindResourceClaimTemplate: "ResourceClaimTemplate", KindResourceSlice: "ResourceSlice",
	KindComputeDomain: "ComputeDomain", KindPodGroup: "PodGroup", KindOwner: "Owner",
}

func (k Kind) String() string { return kindNames[k] }

// Namespaced reports whether objects of the kind have a namespace (a removal names it).
func (k Kind) Namespaced() bool {
	return k != KindNode && k != KindResourceSlice && k != KindOwner
}

// Sentinel errors, one per error kind of the header.
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
	ErrBusy          = errors.New("cdplace: every policy instance busy")
	// ErrPolicyViolation: the policy's answer broke a safety rule (a node the driver's Prepare
	// would refuse); the answer was not used. PolicyViolationRule reads the rule.
	ErrPolicyViolation = errors.New("cdplace: policy answer broke a safety rule")
	// ErrRefused: cdplace_cluster_swap refused the new policy; the old one still decides.
	ErrRefused = errors.New("cdplace: new policy refused")
	// ErrWorld: the component does not match the WIT world this library was built against.
	ErrWorld = errors.New("cdplace: component of another WIT world")
)

var sentinels = map[int]error{
	int(C.CDPLACE_ERROR_LOAD):             ErrLoad,
	int(C.CDPLACE_ERROR_TRAP):             ErrTrap,
	int(C.CDPLACE_ERROR_TIMEOUT):          ErrTimeout,
	int(C.CDPLACE_ERROR_OUT_OF_MEMORY):    ErrOutOfMemory,
	int(C.CDPLACE_ERROR_INVALID_ARGS):     ErrInvalidArgs,
	int(C.CDPLACE_ERROR_INVALID_OBJECT):   ErrInvalidObject,
	int(C.CDPLACE_ERROR_INVALID_INPUT):    ErrInvalidInput,
	int(C.CDPLACE_ERROR_UNKNOWN_POD):      ErrUnknownPod,
	int(C.CDPLACE_ERROR_PANIC):            ErrPanic,
	int(C.CDPLACE_ERROR_BAD_CALL):         ErrBadCall,
	int(C.CDPLACE_ERROR_BUSY):             ErrBusy,
	int(C.CDPLACE_ERROR_POLICY_VIOLATION): ErrPolicyViolation,
	int(C.CDPLACE_ERROR_REFUSED):          ErrRefused,
	int(C.CDPLACE_ERROR_WORLD):            ErrWorld,
}

// policyViolationPrefix starts every policy violation's message (the library's
// safety::MESSAGE_PREFIX); the rule's name follows, then ": ".
const policyViolationPrefix = "policy violation: rule "

// PolicyViolationRules are the safety rules the library enforces (the names of
// host-shim/lib/src/safety.rs Rule), the values of the rule label of
// cdplace_policy_violations_total.
var PolicyViolationRules = []string{"one-domain-per-node", "one-clique-per-domain", "one-workload-per-node",
	"victim-lower-priority", "victim-on-preemptor-trays", "victim-whole-domain"}

// PolicyViolationRule is the rule a policy violation broke, "" when err is none.
func PolicyViolationRule(err error) string {
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrPolicyViolation {
		return ""
	}
	rest, ok := strings.CutPrefix(e.Message, policyViolationPrefix)
	if !ok {
		return "unknown"
	}
	rule, _, _ := strings.Cut(rest, ":")
	for _, r := range PolicyViolationRules {
		if r == rule {
			return r
		}
	}
	return "unknown"
}

// ABIVersion is the CDPLACE_ABI_VERSION of the header this package was built against.
const ABIVersion = C.CDPLACE_ABI_VERSION

// LibraryABIVersion is the version the linked library reports (cdplace_abi_version); it equals
// ABIVersion in any binary built from one tree.
func LibraryABIVersion() uint32 { return uint32(C.cdplace_abi_version()) }

// Error is a failure reported by the library: Kind is one of the sentinels, Message its
// text, shown as it is.
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
	kind, ok := sentinels[int(C.cdplace_error_kind(e))]
	if !ok {
		kind = ErrBadCall
	}
	return &Error{Kind: kind, Message: string(buf)}
}

// crossings counts every call into the library, process-wide.
var crossings atomic.Uint64

// Crossings is how many calls this process made into the library.
func Crossings() uint64 { return crossings.Load() }

// str passes a Go string to C without copying; C only borrows it for the call.
func str(s string) (*C.char, C.size_t) {
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

// bytesOf passes Go bytes to C without copying; C only borrows them for the call.
func bytesOf(b []byte) (*C.uint8_t, C.size_t) {
	return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
}

// charsOf passes Go bytes holding text to C without copying.
func charsOf(b []byte) (*C.char, C.size_t) {
	return (*C.char)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
}

func takeBytes(b *C.cdplace_bytes_t) []byte {
	defer C.cdplace_bytes_delete(b)
	return C.GoBytes(unsafe.Pointer(b.data), C.int(b.len))
}
