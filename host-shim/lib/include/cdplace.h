/*
 * cdplace.h — C ABI of the cdplace host (libcdplace_host.a), version 5 (CDPLACE_ABI_VERSION).
 *
 * Runs the cdplace placement policy, a WebAssembly component, inside wasmtime on behalf of
 * kube-scheduler. Conventions (as in wasmtime's C API):
 *   - Every fallible function returns an owned cdplace_error_t* (NULL on success); results go
 *     through out-parameters. Free errors with cdplace_error_delete.
 *   - Strings are (pointer, length) UTF-8, borrowed only for the duration of the call; they need
 *     no NUL terminator. Byte buffers are (pointer, length) too; a length of 0 allows NULL.
 *   - Bytes the library allocates (cdplace_bytes_t) are freed with cdplace_bytes_delete.
 *   - A Rust panic never unwinds into the caller: it becomes CDPLACE_ERROR_PANIC.
 *   - The library installs no signal handlers (safe inside a Go process).
 *   - Packed formats are little-endian. Their primitives:
 *       str  = u32 byte length + UTF-8 bytes
 *       ostr = u8 0 | u8 1, str
 *       ou32 = u8 0 | u8 1, u32
 *       oi32 = u8 0 | u8 1, i32
 *       oi64 = u8 0 | u8 1, i64
 *     Booleans are u8 0 | 1 exactly.
 *
 * Thread-safety: each function says. In short, a cdplace_runtime_t and a cdplace_cluster_t may
 * be used from many threads at once (each concurrent cdplace_cluster_pre_filter gets its own
 * guest instance, and no lock is held during a guest call); only the *_delete functions need
 * the caller to ensure nothing else uses the object.
 *
 * Link: libcdplace_host.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
 */
#ifndef CDPLACE_H
#define CDPLACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The version of this header. 5: a cluster's policy can be replaced while it serves
 * (cdplace_cluster_swap, cdplace_cluster_policy_generation); PreFilter and steering report the
 * policy generation that decided (a new out-parameter); CDPLACE_ERROR_REFUSED, _WORLD; the
 * decision calls at a given policy time (cdplace_cluster_pre_filter_at, _steer_at, _preempt_at).
 * cdplace_abi_version returns the library's: a caller checks they are equal.
 */
#define CDPLACE_ABI_VERSION 5

/** An error: a kind and a message. Owned by the caller once returned. */
typedef struct cdplace_error_t cdplace_error_t;
/** The compiled policy component. */
typedef struct cdplace_runtime_t cdplace_runtime_t;
/** A cluster view with the policy instances that evaluate it. */
typedef struct cdplace_cluster_t cdplace_cluster_t;

/** Bytes owned by the library; free with cdplace_bytes_delete. */
typedef struct cdplace_bytes_t {
  uint8_t *data;
  size_t len;
} cdplace_bytes_t;

/** Error kinds returned by cdplace_error_kind. */
typedef enum cdplace_error_kind_t {
  CDPLACE_ERROR_LOAD = 1,           /* the component could not be read or compiled */
  CDPLACE_ERROR_TRAP = 2,           /* the guest trapped; its instance was discarded */
  CDPLACE_ERROR_TIMEOUT = 3,        /* the guest passed its deadline; instance discarded */
  CDPLACE_ERROR_OUT_OF_MEMORY = 4,  /* the guest passed its memory limit; instance discarded */
  CDPLACE_ERROR_INVALID_ARGS = 5,   /* plugin arguments invalid; the message names the field */
  CDPLACE_ERROR_INVALID_OBJECT = 6, /* a Kubernetes object could not be understood */
  CDPLACE_ERROR_INVALID_INPUT = 7,  /* the guest rejected input (a host bug) */
  CDPLACE_ERROR_UNKNOWN_POD = 8,    /* a call named a pod the view does not have */
  CDPLACE_ERROR_PANIC = 9,          /* a bug in the library, caught at the boundary */
  CDPLACE_ERROR_BAD_CALL = 10,      /* NULL pointers, bad UTF-8, a malformed batch or overlay */
  CDPLACE_ERROR_BUSY = 11,          /* all maxPolicyInstances instances stayed busy until the
                                       call's deadline; retry later */
  CDPLACE_ERROR_POLICY_VIOLATION = 12, /* the policy's answer broke a safety rule (a node the
                                       driver's Prepare would refuse); the message starts
                                       "policy violation: rule <name>: " and names the node and
                                       the other domain; the answer is not used */
  CDPLACE_ERROR_REFUSED = 13,       /* cdplace_cluster_swap refused the new policy; the message is
                                       "policy refused (<check>): <why>", check one of instantiate,
                                       configure, settings, self-test; the old policy still decides */
  CDPLACE_ERROR_WORLD = 14          /* the component compiled but does not match the WIT world this
                                       library was built against (another WIT version) */
} cdplace_error_kind_t;

/** How a cluster's journal and policy instances stand (cdplace_cluster_stats). */
typedef struct cdplace_stats_t {
  uint64_t journal_length; /* deltas journaled for instances that are behind */
  uint64_t idle_instances; /* instances waiting for a call */
  uint64_t busy_instances; /* instances in a call */
  uint64_t quarantined_objects; /* objects held out of the view: their facts trap the guest */
  uint64_t policy_violations; /* PreFilter answers refused by the safety rules so far */
} cdplace_stats_t;

/** A scheduling framework status code, as the packed decision carries it (one byte). */
typedef enum cdplace_code_t {
  CDPLACE_CODE_SUCCESS = 0,
  CDPLACE_CODE_SKIP = 1,                          /* not a ComputeDomain pod */
  CDPLACE_CODE_UNSCHEDULABLE = 2,                 /* preemption or a change may help */
  CDPLACE_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE = 3,
  CDPLACE_CODE_ERROR = 4
} cdplace_code_t;

/** The kind of a record of a facts batch (one byte). */
typedef enum cdplace_kind_t {
  CDPLACE_KIND_NODE = 1,
  CDPLACE_KIND_POD = 2,
  CDPLACE_KIND_RESOURCE_CLAIM = 3,
  CDPLACE_KIND_RESOURCE_CLAIM_TEMPLATE = 4,
  CDPLACE_KIND_RESOURCE_SLICE = 5,
  CDPLACE_KIND_COMPUTE_DOMAIN = 6,
  CDPLACE_KIND_POD_GROUP = 7,
  CDPLACE_KIND_OWNER = 8 /* a workload controller's size; name = owner key "<Kind>/<ns>/<name>" */
} cdplace_kind_t;

/**
 * The error's kind, one of cdplace_error_kind_t (CDPLACE_ERROR_BAD_CALL for NULL).
 * Thread-safe; err must stay alive for the call.
 */
cdplace_error_kind_t cdplace_error_kind(const cdplace_error_t *err);

/**
 * Copies up to cap bytes of the message (UTF-8, no NUL added) into buf and returns the
 * message's full length, so a caller can size its buffer (buf may be NULL when cap is 0).
 * Thread-safe; err must stay alive for the call.
 */
size_t cdplace_error_message(const cdplace_error_t *err, uint8_t *buf, size_t cap);

/** Frees an error (NULL allowed). Not concurrently with other uses of err. */
void cdplace_error_delete(cdplace_error_t *err);

/** Frees library-owned bytes (NULL allowed); resets data and len. Not concurrently with other uses. */
void cdplace_bytes_delete(cdplace_bytes_t *bytes);

/** The library's CDPLACE_ABI_VERSION. Thread-safe. */
uint32_t cdplace_abi_version(void);

/**
 * Compiles the policy component (.wasm bytes) once and writes the runtime to *out. The
 * component may import nothing. Limits are not set here: each cluster takes them from its
 * plugin arguments. Errors: CDPLACE_ERROR_LOAD (not a component, or it does not compile),
 * CDPLACE_ERROR_WORLD (a component of another world or WIT version), CDPLACE_ERROR_BAD_CALL.
 * Thread-safe; the result may be shared between threads.
 */
cdplace_error_t *cdplace_runtime_new(const uint8_t *wasm, size_t wasm_len, cdplace_runtime_t **out);

/**
 * Frees a runtime (NULL allowed); clusters made from it keep what they need until they are freed.
 * Not concurrently with other uses of rt.
 */
void cdplace_runtime_delete(cdplace_runtime_t *rt);

/**
 * A cluster view evaluated by the runtime's component, written to *out. args is the plugin's
 * raw pluginConfig args as JSON, every field (guestPath, guestCallTimeout and
 * guestMemoryLimitMiB included; empty for defaults). The policy is the only validator: invalid
 * arguments give CDPLACE_ERROR_INVALID_ARGS with its text. The cluster's guest instances run
 * under the call timeout and memory limit of these arguments.
 * Thread-safe; the result may be shared between threads.
 */
cdplace_error_t *cdplace_cluster_new(const cdplace_runtime_t *rt, const char *args, size_t args_len,
                                     cdplace_cluster_t **out);

/** Frees a cluster (NULL allowed). No call on it may be in flight or follow. */
void cdplace_cluster_delete(cdplace_cluster_t *c);

/**
 * The validated arguments the host needs, as JSON in *out (every key, always; the Rust
 * Settings and the Go cdplace.Settings are tested against this list):
 *   {"cliqueLabel": S, "gpuResourceName": S, "gpuDriver": S, "computeDomainDriver": S,
 *    "sizeAnnotation": S, "guestPath": S|null, "callTimeoutMs": N, "memoryLimitMiB": N,
 *    "plainPodSteering": B, "maxPolicyInstances": N}
 * Thread-safe.
 */
cdplace_error_t *cdplace_cluster_settings(const cdplace_cluster_t *c, cdplace_bytes_t *out);

/**
 * Applies a packed facts batch, in order. The whole batch is decoded first: a malformed batch
 * gives CDPLACE_ERROR_BAD_CALL naming the byte offset and the record index, and nothing of it
 * is applied. Thread-safe (batches from several threads apply one after another).
 *
 *   batch  = "CDF3", u32 nrecords, nrecords x record
 *   record = u8 op (1 upsert, 2 remove), u8 kind (cdplace_kind_t), body
 *   remove body: str namespace ("" for cluster-scoped kinds and for Owner),
 *                str name (for Owner: the owner key)
 *   upsert bodies:
 *     Node          str name, ostr cliqueLabel, ostr domainLabel (resource.nvidia.com/computeDomain),
 *                   u8 unschedulable, u32 gpus (allocatable of the GPU extended resource)
 *     Pod           str namespace, str name, u8 terminal (phase Succeeded|Failed: removes the pod),
 *                   ostr nodeName, ostr nominatedNodeName,
 *                   u32 nclaims x (str name, ostr resourceClaimTemplateName, ostr resourceClaimName,
 *                                  ostr generatedClaimName),
 *                   u32 gpus (extended resource: max(sum of containers, max of init containers),
 *                   requests else limits), ou32 sizeAnnotation,
 *                   ostr podGroupName (spec.schedulingGroup.podGroupName),
 *                   ostr ownerKey ("<Kind>/<ns>/<name>" of the top-level controller whose size counts),
 *                   i64 createdMs (creationTimestamp, Unix ms, 0 if unset), i32 priority (0 if unset),
 *                   oi64 runtimeLimitMs ((spec.activeDeadlineSeconds + terminationGracePeriodSeconds,
 *                   30 if unset) x 1000, saturating; none without a deadline),
 *                   i64 startedMs (status.startTime, Unix ms, 0 if unset)
 *     ResourceClaim str namespace, str name, ostr domain (domainID of an opaque
 *                   ComputeDomainChannelConfig/DaemonConfig of the compute-domain driver),
 *                   u8 daemon, u32 gpuCount, u8 gpuAll, ou32 allocatedGpus
 *     ResourceClaimTemplate  str namespace, str name, ostr domain (label
 *                   resource.nvidia.com/computeDomain, else config domainID), u8 daemon (label
 *                   resource.nvidia.com/computeDomainTarget == Daemon, else DaemonConfig),
 *                   u32 gpuCount, u8 gpuAll
 *     ResourceSlice str name, ostr node (only for slices of the GPU driver),
 *                   u32 gpus (devices with attribute type absent or "gpu"),
 *                   str pool (spec.pool.name, non-empty when node is set),
 *                   i64 generation (spec.pool.generation: only a pool's newest generation counts)
 *     ComputeDomain str namespace, str name, str uid, ou32 sizeAnnotation, ou32 numNodes (when > 0)
 *     PodGroup      str namespace, str name, ou32 minCount (spec.schedulingPolicy.gang.minCount),
 *                   oi32 priority (spec.priority)
 *     Owner         str key ("Job/ns/name", "JobSet/ns/name", "StatefulSet/ns/name",
 *                   "Deployment/ns/name", "ReplicaSet/ns/name", "LeaderWorkerSet/ns/name"),
 *                   ou32 size (none: forget the owner), str source ("Job training/trainer
 *                   spec.parallelism"), oi32 priority
 *   Names, namespaces of namespaced kinds, the ComputeDomain uid and the owner key must not be
 *   empty; no bytes may follow the last record.
 */
cdplace_error_t *cdplace_cluster_apply_facts(const cdplace_cluster_t *c, const uint8_t *facts, size_t len);

/**
 * Reserve: counts the pod ns/name on the node at once, until it is bound or forgotten.
 * Unknown pod: CDPLACE_ERROR_UNKNOWN_POD. Thread-safe.
 */
cdplace_error_t *cdplace_cluster_assume(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                        const char *name, size_t name_len, const char *node, size_t node_len);

/** Unreserve: forgets an assumption (none is fine). Thread-safe. */
cdplace_error_t *cdplace_cluster_forget(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                        const char *name, size_t name_len);

/**
 * PreFilter for pod ns/name, as if the packed overlay (preemption's AddPod/RemovePod) were
 * applied; overlay_len 0 means none:
 *   u32 n x (u8 op (1 remove, 2 add), str namespace, str name, str node ("" for remove))
 * Writes the packed decision to *out:
 *   "CDP4"
 *   u32 nreasons, nreasons x str
 *   status: u8 code (cdplace_code_t), u32 reason (index into the reasons)
 *   u8 has_domain, [str domain]                    the pod's ComputeDomain UID
 *   u8 exclusive                                   only the successful cliques are allowed
 *   other: u8 code, u32 reason, u32 score          nodes whose clique is not listed (score:
 *                                                  when other is Success, plain-pod steering)
 *   u32 ncliques x (str label, u8 code, u32 reason, u32 score, u8 flags)   by clique label
 *                                                  value; flags bit 0: stable (plain-pod steering:
 *                                                  a plain pod placed there keeps this answer)
 *   u32 nnodes x (str node, u8 code, u32 reason)                 nodes that differ from their clique
 *   u8 has_node_set, [u32 n x str node]            the PreFilterResult: when exclusive, the nodes
 *                                                  of the domain's clique; for a domain not started,
 *                                                  the nodes of its 3 best-scoring fitting cliques
 *                                                  (ties at the cut included); otherwise absent
 *                                                  (all nodes)
 * Filter(node) = status if not Success, else nodes[node], else cliques[label], else other;
 * Score(node) = cliques[label].score, else other's score, when Filter(node) is Success.
 * Errors: CDPLACE_ERROR_UNKNOWN_POD; CDPLACE_ERROR_TRAP, _TIMEOUT, _OUT_OF_MEMORY (the instance is
 * discarded and the next call uses a fresh one); CDPLACE_ERROR_BUSY when all maxPolicyInstances
 * instances stayed in calls until the deadline; CDPLACE_ERROR_BAD_CALL for a malformed overlay;
 * CDPLACE_ERROR_POLICY_VIOLATION when the answer allows a node that breaks a safety rule
 * (driver-managed IMEX: a node holding another ComputeDomain; a node already holding a workload
 * pod of the pod's domain; a node outside the clique the domain runs in): the library checks
 * every answer against its view before it is returned, whatever policy gave it.
 * One deadline (guestCallTimeout) covers the whole call: waiting for an instance, making one
 * from a snapshot or catching one up, and the decision.
 * *generation (when not NULL) is the policy generation that decided (cdplace_cluster_swap): a
 * call in flight during a swap is decided by the old policy and says so.
 * Thread-safe: concurrent calls run on separate guest instances (at most maxPolicyInstances).
 */
cdplace_error_t *cdplace_cluster_pre_filter(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                            const char *name, size_t name_len, const uint8_t *overlay,
                                            size_t overlay_len, cdplace_bytes_t *out, uint64_t *generation);

/**
 * The decision calls at a given policy time now_ms (Unix milliseconds) instead of the host's
 * clock: the recorder writes the time of each decision down and `cdplace replay` asks again at
 * it (the policy's settling and reservations read the clock). Otherwise as the calls above/below.
 */
cdplace_error_t *cdplace_cluster_pre_filter_at(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                               const char *name, size_t name_len, const uint8_t *overlay,
                                               size_t overlay_len, int64_t now_ms, cdplace_bytes_t *out,
                                               uint64_t *generation);
cdplace_error_t *cdplace_cluster_steer_at(const cdplace_cluster_t *c, uint8_t gpus, int64_t now_ms,
                                          cdplace_bytes_t *out, uint64_t *generation);
cdplace_error_t *cdplace_cluster_preempt_at(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                            const char *name, size_t name_len, int64_t now_ms,
                                            cdplace_bytes_t *out);

/**
 * Plain-pod steering: where a pod without a ComputeDomain should go, the same answer for every
 * such pod on the same view at the same time (cache it per view version, at most ~1 s: reservations
 * change with the clock). gpus: 1 when the pod uses GPUs, else 0.
 * Writes a packed decision to *out, as cdplace_cluster_pre_filter (never a node set; other is
 * Success with its score): status Skip when plainPodSteering is off or no node has a clique;
 * else per clique a score (broken cliques above intact ones, nodes without a clique above both)
 * (a clique reserved for a waiting domain lowest) and, for GPU pods, Unschedulable on cliques
 * whose free trays are all promised to starting domains or held for a reservation, with the
 * nodes there that stay open listed. Errors as for PreFilter; *generation (when not NULL) as there.
 * Thread-safe.
 */
cdplace_error_t *cdplace_cluster_steer(const cdplace_cluster_t *c, uint8_t gpus, cdplace_bytes_t *out,
                                       uint64_t *generation);

/**
 * Replaces the cluster's policy with the runtime's component while the cluster serves. The
 * component is checked first, on an instance of its own, and decides nothing until every check
 * passes: "instantiate" (it instantiates under the cluster's memory and call time limits),
 * "configure" (it accepts the cluster's arguments), "settings" (it answers the same host
 * settings as the policy deciding now: a policy must not change callTimeoutMs, memoryLimitMiB,
 * cliqueLabel, the drivers, ...), "self-test" (fed the live view as every new instance is, it
 * decides PreFilter for one pending pod of every ComputeDomain and up to 64 placed ones through
 * the live PreFilter path, asks preemption's what-ifs for up to 16 of those pending pods
 * (PreFilter with a placed pod removed, then removed and added back: the AddPod/RemovePod
 * overlays), gives the fleet status once and steers once when plainPodSteering is
 * on: no trap, no Error status, each call within guestCallTimeout). Then, at once, the policy
 * generation goes up by one and every later call is decided by the new component; calls in
 * flight finish on the old one, whose instances are dropped as they come back. The view and the
 * journal are kept (nothing is fed again).
 * On success writes a report as JSON to *report (free with cdplace_bytes_delete):
 *   {"generation": N (the new one), "pendingDomains": N, "placedPods": N, "whatIfs": N,
 *    "gonePods": N (left
 *    the view meanwhile), "calls": N, "slowestCallUs": N, "slowestCall": S, "setupUs": N
 *    (instantiate, configure, snapshot), "elapsedUs": N}
 * Errors: CDPLACE_ERROR_REFUSED (the old policy still decides; the message names the check and
 * why, with the guest's error), CDPLACE_ERROR_BAD_CALL.
 * Thread-safe: it runs alongside every other call on the cluster (no lock is held during its
 * guest calls, which take as long as the self-test: call it off the scheduling path); two swaps
 * on one cluster run one after the other. rt may be freed afterwards (the cluster keeps what
 * it needs).
 */
cdplace_error_t *cdplace_cluster_swap(const cdplace_cluster_t *c, const cdplace_runtime_t *rt,
                                      cdplace_bytes_t *report);

/**
 * Writes the generation of the policy deciding now to *out: 1 for the component the cluster was
 * made with, one more for each swap. Thread-safe (a short lock, no guest call).
 */
cdplace_error_t *cdplace_cluster_policy_generation(const cdplace_cluster_t *c, uint64_t *out);

/**
 * Sets the cluster's shadow policy to the runtime's component, or clears it when rt is NULL. A
 * shadow passes the same checks as cdplace_cluster_swap (errors: CDPLACE_ERROR_REFUSED; the
 * shadow set before, if any, stays) and then never acts: every live PreFilter answer for a
 * ComputeDomain pod without an overlay is queued (at most 64 waiting, one per domain; a full
 * queue drops it, counted as "skipped") for cdplace_cluster_shadow_step to ask the shadow on the
 * same view. The live call only copies its answer. Writes the checks' report (the JSON of
 * cdplace_cluster_swap, "null" when cleared) to *report. Thread-safe.
 */
cdplace_error_t *cdplace_cluster_set_shadow(const cdplace_cluster_t *c, const cdplace_runtime_t *rt,
                                            cdplace_bytes_t *report);

/**
 * Asks the shadow policy about the oldest waiting live decision, on the view that decision was
 * made on (the shadow's instance is brought to that journal position, never past it; a decision
 * behind it, or whose view was cut or compacted away, is "skipped"), and compares the answers:
 * "agree", "would-not-place" (the live answer offers a clique, the shadow's none),
 * "would-place", "other-clique" (another best clique), "elsewhere" (the same best clique, other
 * cliques or nodes offered), "other-victims" (a gang preemption in the same clique evicting other
 * pods or domains), "error" (the shadow's call failed; its instance is rebuilt). Gang preemption
 * (cdplace_cluster_preempt) is queued and compared the same way.
 * *did is 1 when a decision waited, else 0. One guest call under guestCallTimeout: call it off
 * the scheduling path, as often as the caller's CPU budget allows. Thread-safe.
 */
cdplace_error_t *cdplace_cluster_shadow_step(const cdplace_cluster_t *c, uint8_t *did);

/**
 * What the shadow did since the last call, as JSON to *out (the counts and divergences are
 * taken): {"active": bool, "generation": N, "outcomes": {"agree": N, ...}, "divergences": [{
 * "domain": UID, "pod": "ns/name", "outcome": O, "live": S, "shadow": S, "position": N,
 * "liveGeneration": N, "shadowGeneration": N}] (one each time a domain's outcome changes to a
 * divergent one, oldest first, at most 256), "dropped": N, "queued": N, "busyUs": N (time in the
 * shadow's guest calls)}. Thread-safe.
 */
cdplace_error_t *cdplace_cluster_shadow_take(const cdplace_cluster_t *c, cdplace_bytes_t *out);

/**
 * Gang preemption (PostFilter) for pod ns/name: which whole lower-priority ComputeDomains and
 * plain GPU pods to evict so that its domain (not started yet) fits one NVLink clique. Writes
 * JSON to *out (free with cdplace_bytes_delete):
 *   {"domain": S|null,
 *    "plan": {"clique": S, "node": S (to nominate the pod to), "pods": ["ns/name", ...],
 *             "domains": [UID, ...], "gpus": N, "priority": N (highest victim priority),
 *             "trays": N} | null (preemption cannot help),
 *    "reason": S (why not, or what the plan does)}
 * The view is not changed: the victims leave it when their deletions are applied as facts.
 * Errors: CDPLACE_ERROR_UNKNOWN_POD; CDPLACE_ERROR_TRAP, _TIMEOUT, _OUT_OF_MEMORY (the instance
 * is discarded). Thread-safe: concurrent calls run on separate guest instances.
 */
cdplace_error_t *cdplace_cluster_preempt(const cdplace_cluster_t *c, const char *ns, size_t ns_len,
                                         const char *name, size_t name_len, cdplace_bytes_t *out);

/**
 * The fleet status, for metrics and Events on ComputeDomains (version 4). Writes JSON to *out
 * (free with cdplace_bytes_delete):
 *   {"cliques": [{"clique": S (label value), "usable": N, "free": N (trays a new domain could
 *                 take now), "promised": N (free trays promised to starting domains),
 *                 "reservedFor": S|null (UID a head-of-queue reservation holds it for)}, ...],
 *    "domains": [{"uid": S, "namespace": S, "name": S ("" when the object does not exist),
 *                 "phase": "idle"|"pending"|"starting"|"running",
 *                 "pending": null | "no_compute_domain"|"size_unknown"|"settling"|
 *                            "no_clique_fits"|"waiting_for_trays"|"reserved_elsewhere"|
 *                            "holds_reservation"|"victims_leaving"|"placeable"|"unresolvable",
 *                 "size": N, "placed": N, "needed": N, "clique": S|null (started: its clique;
 *                 pending: the best one), "offer": N (pending: trays the best clique offers),
 *                 "note": S (what to say on the ComputeDomain, "" for nothing; no clock in it)}, ...],
 *    "largestPlaceable": N (trays a domain not started could take in one clique now),
 *    "reservedTrays": N (the sizes of the domains head-of-queue reservations are for)}
 * It decides once per pending domain: call it at most about once a second, never per pod.
 * Errors: CDPLACE_ERROR_TRAP, _TIMEOUT, _OUT_OF_MEMORY (the instance is discarded).
 * Thread-safe: concurrent calls run on separate guest instances.
 */
cdplace_error_t *cdplace_cluster_status(const cdplace_cluster_t *c, cdplace_bytes_t *out);

/**
 * Writes how the cluster's journal and instances stand now to *out (two short locks, no guest
 * call: cheap enough for every metrics scrape). Thread-safe.
 */
cdplace_error_t *cdplace_cluster_stats(const cdplace_cluster_t *c, cdplace_stats_t *out);

/**
 * Quarantine: when applying deltas to an instance traps the guest, the library applies a fresh
 * snapshot one object at a time to find the object whose facts trap it, drops that object from
 * the view until its next update or deletion, rebuilds every instance without it, and the call
 * goes on. This writes the objects quarantined since the last call (each once) as JSON to *out
 * (free with cdplace_bytes_delete): [{"kind": S, "namespace": S ("" when cluster-scoped),
 * "name": S, "error": S}], kind one of Node, Pod, ResourceClaim, ResourceClaimTemplate,
 * ComputeDomain, PodGroup, Owner. Thread-safe.
 */
cdplace_error_t *cdplace_cluster_take_quarantined(const cdplace_cluster_t *c, cdplace_bytes_t *out);

#ifdef __cplusplus
}
#endif

#endif /* CDPLACE_H */
