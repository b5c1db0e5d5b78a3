/*
 * cdplace.h — C ABI of the cdplace host (libcdplace_host.a).
 *
 * Runs the cdplace placement policy, a WebAssembly component, inside wasmtime on behalf of
 * kube-scheduler. Conventions (as in wasmtime's C API):
 *   - Every fallible function returns an owned cdplace_error_t* (NULL on success); results go
 *     through out-parameters. Free errors with cdplace_error_delete.
 *   - Strings are (pointer, length) UTF-8, borrowed only for the duration of the call; they need
 *     no NUL terminator.
 *   - Bytes the library allocates (cdplace_bytes_t) are freed with cdplace_bytes_delete.
 *   - A Rust panic never unwinds into the caller: it becomes CDPLACE_ERROR_PANIC.
 *   - The library installs no signal handlers (safe inside a Go process).
 * Thread-safety: a cdplace_runtime_t and a cdplace_cluster_t may be used from many threads at
 * once; each concurrent cdplace_cluster_pre_filter gets its own guest instance.
 *
 * Link: libcdplace_host.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
 */
#ifndef CDPLACE_H
#define CDPLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cdplace_error_t cdplace_error_t;
typedef struct cdplace_runtime_t cdplace_runtime_t;
typedef struct cdplace_cluster_t cdplace_cluster_t;

/* Bytes owned by the library; free with cdplace_bytes_delete. */
typedef struct cdplace_bytes_t {
  uint8_t *data;
  size_t len;
} cdplace_bytes_t;

/* Error kinds returned by cdplace_error_kind. */
#define CDPLACE_ERROR_LOAD 1           /* the component could not be read or compiled */
#define CDPLACE_ERROR_TRAP 2           /* the guest trapped; its instance was discarded */
#define CDPLACE_ERROR_TIMEOUT 3        /* the guest passed its deadline; instance discarded */
#define CDPLACE_ERROR_OUT_OF_MEMORY 4  /* the guest passed its memory limit; instance discarded */
#define CDPLACE_ERROR_INVALID_ARGS 5   /* plugin arguments invalid; the message names the field */
#define CDPLACE_ERROR_INVALID_OBJECT 6 /* a Kubernetes object could not be understood */
#define CDPLACE_ERROR_INVALID_INPUT 7  /* the guest rejected input (a host bug) */
#define CDPLACE_ERROR_UNKNOWN_POD 8    /* pre_filter for a pod the view does not have */
#define CDPLACE_ERROR_PANIC 9          /* a bug in the library, caught at the boundary */
#define CDPLACE_ERROR_BAD_CALL 10      /* NULL pointers, bad UTF-8, unknown kind, bad overlay */

/* The error's kind, one of CDPLACE_ERROR_*. */
int32_t cdplace_error_kind(const cdplace_error_t *err);
/* Copies up to cap bytes of the message into buf (no NUL added); returns its full length. */
size_t cdplace_error_message(const cdplace_error_t *err, uint8_t *buf, size_t cap);
/* Frees an error (NULL allowed). */
void cdplace_error_delete(cdplace_error_t *err);
/* Frees library-owned bytes (NULL allowed); resets data and len. */
void cdplace_bytes_delete(cdplace_bytes_t *bytes);

/* Compiles the policy component once. memory_bytes: most linear memory per guest instance;
 * deadline_ms: longest one guest call may run. 0 means the default (512 MiB, 2000 ms). */
cdplace_error_t *cdplace_runtime_new(const uint8_t *wasm, size_t wasm_len, uint64_t memory_bytes,
                                     uint64_t deadline_ms, cdplace_runtime_t **out);
/* Frees a runtime; clusters made from it stay valid until freed. */
void cdplace_runtime_delete(cdplace_runtime_t *rt);

/* A cluster view evaluated by the runtime's component under the plugin arguments (JSON of
 * ComputeDomainPlacementArgs; empty for defaults). Bad arguments: CDPLACE_ERROR_INVALID_ARGS. */
cdplace_error_t *cdplace_cluster_new(const cdplace_runtime_t *rt, const char *args, size_t args_len,
                                     cdplace_cluster_t **out);
/* The same with the policy compiled natively into the library (comparisons only). */
cdplace_error_t *cdplace_cluster_new_native(const char *args, size_t args_len, cdplace_cluster_t **out);
/* Frees a cluster; no call on it may be in flight. */
void cdplace_cluster_delete(cdplace_cluster_t *c);

/* The extraction keys of the validated arguments as JSON: {"cliqueLabel", "gpuResourceName",
 * "gpuDriver", "computeDomainDriver", "sizeAnnotation"}. */
cdplace_error_t *cdplace_cluster_keys(const cdplace_cluster_t *c, cdplace_bytes_t *out);

/* Adds or updates an object (JSON with apiVersion and kind: Node, Pod, ResourceClaim,
 * ResourceClaimTemplate, ResourceSlice, ComputeDomain, PodGroup). Other kinds are ignored;
 * *read (if not NULL) is set to whether the kind was read. */
cdplace_error_t *cdplace_cluster_apply(const cdplace_cluster_t *c, const char *json, size_t len, bool *read);
/* Removes an object by kind name (as above), namespace ("" for cluster-scoped) and name. */
cdplace_error_t *cdplace_cluster_remove(const cdplace_cluster_t *c, const char *kind, size_t kind_len,
                                        const char *ns, size_t ns_len, const char *name, size_t name_len);
/* Reserve: counts the pod on the node at once. Unknown pod: CDPLACE_ERROR_UNKNOWN_POD. */
cdplace_error_t *cdplace_cluster_assume(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                        const char *name, size_t name_len, const char *node, size_t node_len);
/* Unreserve. */
cdplace_error_t *cdplace_cluster_forget(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                        const char *name, size_t name_len);

/* PreFilter for pod ns/name, as if the overlay were applied. overlay: JSON array of
 *   {"op":"remove","namespace":N,"name":P} and {"op":"add","namespace":N,"name":P,"node":X}
 * (empty: none). Writes the decision JSON to *out:
 *   {"status": {"code": C, "reason": R},          C: Success|Skip|Unschedulable|
 *    "domain": UID|null,                             UnschedulableAndUnresolvable|Error
 *    "exclusive": bool,                           only the successful cliques are allowed
 *    "cliques": {LABEL: {"code", "reason", "score"}},  by nvidia.com/gpu.clique value
 *    "other": {"code", "reason"},                 nodes whose clique is not listed
 *    "nodes": {NODE: {"code", "reason"}},         nodes that differ from their clique
 *    "allowedNodes": [NODE...]|null}             the PreFilterResult when exclusive
 * Filter(node) = status if not Success, else nodes[node], else cliques[label], else other;
 * Score(node) = cliques[label].score when that node's Filter is Success. */
cdplace_error_t *cdplace_cluster_pre_filter(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                            const char *name, size_t name_len, const char *overlay,
                                            size_t overlay_len, cdplace_bytes_t *out);

/* cdplace_cluster_pre_filter with the decision packed instead of JSON (what the Go adapter
 * reads; no per-node strings are built and it decodes without a JSON parser). Little-endian:
 *   "CDP1"
 *   u32 nreasons, then nreasons × str          str = u32 length + UTF-8 bytes
 *   status: u8 code, u32 reason                 code: 0 Success, 1 Skip, 2 Unschedulable,
 *   u8 has_domain, [str domain]                       3 UnschedulableAndUnresolvable, 4 Error
 *   u8 exclusive                                reason: index into the reasons
 *   other: u8 code, u32 reason
 *   u32 ncliques, then × (str label, u8 code, u32 reason, u32 score)
 *   u32 nnodes, then × (str node, u8 code, u32 reason)
 *   u32 nallowed, then × str node               (0 unless exclusive) */
cdplace_error_t *cdplace_cluster_pre_filter_packed(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                                   const char *name, size_t name_len, const char *overlay,
                                                   size_t overlay_len, cdplace_bytes_t *out);

#ifdef __cplusplus
}
#endif

#endif /* CDPLACE_H */
