/* Drives the C ABI (v2) from C, as a cgo caller would: load the component, feed a packed facts
 * batch, decide, read the packed decision, and check error reporting and fail-closed guests.
 * Usage: smoke GUEST.wasm FAULTY.wasm. Exit 0 when every check holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdplace.h"

static int failures = 0;
#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                         \
      fputc('\n', stderr);                                  \
      failures++;                                           \
    }                                                       \
  } while (0)

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(*len);
  if (fread(buf, 1, *len, f) != *len) { perror("read"); exit(2); }
  fclose(f);
  return buf;
}

/* The message of err (caller frees), or "" for NULL. */
static char *message(cdplace_error_t *err) {
  if (!err) return calloc(1, 1);
  size_t n = cdplace_error_message(err, NULL, 0);
  char *buf = calloc(n + 1, 1);
  cdplace_error_message(err, (uint8_t *)buf, n);
  return buf;
}

/* Checks err is of kind want; prints its message otherwise; frees it. */
static void expect_kind(cdplace_error_t *err, cdplace_error_kind_t want, const char *what) {
  char *m = message(err);
  CHECK(err != NULL && cdplace_error_kind(err) == want, "%s: want kind %d, got %s (%d) %s", what, want,
        err ? "error" : "success", err ? (int)cdplace_error_kind(err) : 0, m);
  free(m);
  cdplace_error_delete(err);
}

static void expect_ok(cdplace_error_t *err, const char *what) {
  char *m = message(err);
  CHECK(err == NULL, "%s: %s", what, m);
  free(m);
  cdplace_error_delete(err);
}

/* ---------------------------------------------------------------- a CDF3 batch writer */

typedef struct { uint8_t *data; size_t len, cap; uint32_t records; } batch_t;

static void put(batch_t *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 64;
    b->data = realloc(b->data, b->cap);
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}
static void u8(batch_t *b, uint8_t v) { put(b, &v, 1); }
static void u32(batch_t *b, uint32_t v) {
  uint8_t x[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
  put(b, x, 4);
}
static void i32(batch_t *b, int32_t v) { u32(b, (uint32_t)v); }
static void i64(batch_t *b, int64_t v) { u32(b, (uint32_t)((uint64_t)v & 0xffffffffu)); u32(b, (uint32_t)((uint64_t)v >> 32)); }
static void str(batch_t *b, const char *s) { u32(b, (uint32_t)strlen(s)); put(b, s, strlen(s)); }
/* ostr: NULL is none. */
static void ostr(batch_t *b, const char *s) { if (s) { u8(b, 1); str(b, s); } else u8(b, 0); }
static void ou32(batch_t *b, int present, uint32_t v) { u8(b, present ? 1 : 0); if (present) u32(b, v); }

static batch_t batch(void) {
  batch_t b = {0};
  put(&b, "CDF3", 4);
  u32(&b, 0); /* patched by done() */
  return b;
}
static void record(batch_t *b, uint8_t op, cdplace_kind_t kind) { u8(b, op); u8(b, (uint8_t)kind); b->records++; }
static void done(batch_t *b) {
  for (int i = 0; i < 4; i++) b->data[4 + i] = (b->records >> (8 * i)) & 0xff;
}

static void node(batch_t *b, const char *name, const char *clique) {
  record(b, 1, CDPLACE_KIND_NODE);
  str(b, name); ostr(b, clique); ostr(b, NULL); u8(b, 0); u32(b, 4);
}
static void domain(batch_t *b, const char *ns, const char *name, const char *uid, uint32_t size) {
  record(b, 1, CDPLACE_KIND_COMPUTE_DOMAIN);
  str(b, ns); str(b, name); str(b, uid); ou32(b, 1, size); ou32(b, 0, 0);
}
static void template(batch_t *b, const char *ns, const char *name, const char *uid) {
  record(b, 1, CDPLACE_KIND_RESOURCE_CLAIM_TEMPLATE);
  str(b, ns); str(b, name); ostr(b, uid); u8(b, 0); u32(b, 0); u8(b, 0);
}
/* A pod with 4 GPUs and a claim from `tmpl` (NULL: no claim), bound to `node_name` (NULL: pending). */
static void pod(batch_t *b, const char *ns, const char *name, const char *tmpl, const char *node_name) {
  record(b, 1, CDPLACE_KIND_POD);
  str(b, ns); str(b, name); u8(b, 0); ostr(b, node_name); ostr(b, NULL);
  u32(b, tmpl ? 1 : 0);
  if (tmpl) { str(b, "channel"); ostr(b, tmpl); ostr(b, NULL); ostr(b, NULL); }
  u32(b, 4); ou32(b, 0, 0); ostr(b, NULL); ostr(b, NULL); i64(b, 0); i32(b, 0);
  u8(b, 0); i64(b, 0); /* oi64 runtimeLimitMs (none), i64 startedMs */
}

static void apply(cdplace_cluster_t *c, batch_t *b, const char *what) {
  done(b);
  expect_ok(cdplace_cluster_apply_facts(c, b->data, b->len), what);
  free(b->data);
}

/* ---------------------------------------------------------------- a CDP4 reader */

typedef struct { const uint8_t *p; size_t left; int bad; } cursor_t;

static uint8_t rd_u8(cursor_t *c) { if (c->left < 1) { c->bad = 1; return 0; } c->left--; return *c->p++; }
static uint32_t rd_u32(cursor_t *c) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)rd_u8(c) << (8 * i);
  return v;
}
/* Copies a str into buf (NUL-terminated, truncated to cap-1). */
static void rd_str(cursor_t *c, char *buf, size_t cap) {
  uint32_t n = rd_u32(c);
  if (n > c->left) { c->bad = 1; buf[0] = 0; return; }
  size_t k = n < cap - 1 ? n : cap - 1;
  memcpy(buf, c->p, k);
  buf[k] = 0;
  c->p += n;
  c->left -= n;
}

typedef struct {
  int status, exclusive, has_domain, has_node_set;
  char domain[64];
  int nclique;
  char clique[8][64];
  int clique_code[8];
  int nset;
  char set[16][64];
} decision_t;

static int decide(cdplace_cluster_t *c, const char *ns, const char *name, const uint8_t *overlay, size_t overlay_len,
                  decision_t *d, cdplace_error_t **err) {
  cdplace_bytes_t out = {0};
  *err = cdplace_cluster_pre_filter(c, ns, strlen(ns), name, strlen(name), overlay, overlay_len, &out, NULL);
  if (*err) return 0;
  memset(d, 0, sizeof *d);
  cursor_t cur = {out.data, out.len, 0};
  char scratch[256];
  CHECK(out.len >= 4 && memcmp(out.data, "CDP4", 4) == 0, "decision magic");
  cur.p += 4; cur.left -= 4;
  uint32_t nreasons = rd_u32(&cur);
  for (uint32_t i = 0; i < nreasons && !cur.bad; i++) rd_str(&cur, scratch, sizeof scratch);
  d->status = rd_u8(&cur); rd_u32(&cur);
  d->has_domain = rd_u8(&cur);
  if (d->has_domain) rd_str(&cur, d->domain, sizeof d->domain);
  d->exclusive = rd_u8(&cur);
  rd_u8(&cur); rd_u32(&cur); rd_u32(&cur); /* other: code, reason, score */
  uint32_t ncliques = rd_u32(&cur);
  for (uint32_t i = 0; i < ncliques && !cur.bad; i++) {
    int k = d->nclique < 8 ? d->nclique++ : 7;
    rd_str(&cur, d->clique[k], sizeof d->clique[k]);
    d->clique_code[k] = rd_u8(&cur); rd_u32(&cur); rd_u32(&cur);
    CHECK(rd_u8(&cur) == 0, "a ComputeDomain pod's decision marks no clique stable");
  }
  uint32_t nnodes = rd_u32(&cur);
  for (uint32_t i = 0; i < nnodes && !cur.bad; i++) { rd_str(&cur, scratch, sizeof scratch); rd_u8(&cur); rd_u32(&cur); }
  d->has_node_set = rd_u8(&cur);
  if (d->has_node_set) {
    uint32_t n = rd_u32(&cur);
    for (uint32_t i = 0; i < n && !cur.bad; i++) {
      int k = d->nset < 16 ? d->nset++ : 15;
      rd_str(&cur, d->set[k], sizeof d->set[k]);
    }
  }
  CHECK(!cur.bad && cur.left == 0, "decision: %s, %zu bytes left", cur.bad ? "truncated" : "well-formed", cur.left);
  cdplace_bytes_delete(&out);
  CHECK(out.data == NULL && out.len == 0, "bytes_delete resets");
  return 1;
}

static int clique_code(const decision_t *d, const char *label) {
  for (int i = 0; i < d->nclique; i++)
    if (strcmp(d->clique[i], label) == 0) return d->clique_code[i];
  return -1;
}

/* The node set as "a,b,c" (or "(none)" when absent). */
static const char *node_set(const decision_t *d) {
  static char buf[1024];
  if (!d->has_node_set) return "(none)";
  buf[0] = 0;
  for (int i = 0; i < d->nset; i++) {
    if (i) strcat(buf, ",");
    strcat(buf, d->set[i]);
  }
  return buf;
}

/* ---------------------------------------------------------------- the checks */

static void policy_checks(cdplace_runtime_t *rt) {
  cdplace_cluster_t *c = NULL;
  cdplace_error_t *err;

  /* Bad arguments: exact kind and message, from the policy. */
  const char *bad = "{\"reserveTraysPerClique\": 40}";
  err = cdplace_cluster_new(rt, bad, strlen(bad), &c);
  CHECK(err != NULL && cdplace_error_kind(err) == CDPLACE_ERROR_INVALID_ARGS, "bad args kind");
  char *m = message(err);
  CHECK(strcmp(m, "invalid plugin args: reserveTraysPerClique: Invalid value: \"40\": must be less than maxTraysPerClique (18)") == 0,
        "bad args message: %s", m);
  free(m);
  cdplace_error_delete(err);

  /* The host fields come back in the settings. */
  const char *args = "{\"guestCallTimeout\": \"3s\", \"guestMemoryLimitMiB\": 256}";
  expect_ok(cdplace_cluster_new(rt, args, strlen(args), &c), "cluster_new");
  cdplace_bytes_t s = {0};
  expect_ok(cdplace_cluster_settings(c, &s), "settings");
  const char *want = "{\"cliqueLabel\":\"nvidia.com/gpu.clique\",\"gpuResourceName\":\"nvidia.com/gpu\","
                     "\"gpuDriver\":\"gpu.nvidia.com\",\"computeDomainDriver\":\"compute-domain.nvidia.com\","
                     "\"sizeAnnotation\":\"cdplace.nvidia.com/size\",\"guestPath\":null,\"callTimeoutMs\":3000,"
                     "\"memoryLimitMiB\":256,\"plainPodSteering\":true,\"maxPolicyInstances\":16}";
  CHECK(s.len == strlen(want) && memcmp(s.data, want, s.len) == 0, "settings: %.*s", (int)s.len, (const char *)s.data);
  cdplace_bytes_delete(&s);

  /* Clique 1 has two trays, clique 2 one; ComputeDomain cd (size 2) has two pending pods. */
  batch_t b = batch();
  node(&b, "tray-0", "abc-123.1");
  node(&b, "tray-1", "abc-123.1");
  node(&b, "tray-2", "abc-123.2");
  domain(&b, "ns", "cd", "uid-1", 2);
  template(&b, "ns", "cd-channel", "uid-1");
  pod(&b, "ns", "p0", "cd-channel", NULL);
  pod(&b, "ns", "p1", "cd-channel", NULL);
  pod(&b, "ns", "web", NULL, NULL);
  apply(c, &b, "apply_facts");

  decision_t d;
  if (decide(c, "ns", "p0", NULL, 0, &d, &err)) {
    CHECK(d.status == CDPLACE_CODE_SUCCESS, "p0 status %d", d.status);
    CHECK(d.has_domain && strcmp(d.domain, "uid-1") == 0, "p0 domain %s", d.domain);
    CHECK(!d.exclusive, "p0 not exclusive");
    CHECK(clique_code(&d, "abc-123.1") == CDPLACE_CODE_SUCCESS, "clique 1 fits");
    CHECK(clique_code(&d, "abc-123.2") == CDPLACE_CODE_UNSCHEDULABLE, "clique 2 is too small: %d", clique_code(&d, "abc-123.2"));
    CHECK(strcmp(node_set(&d), "tray-0,tray-1") == 0, "p0 node set: %s", node_set(&d));
  } else expect_ok(err, "pre_filter p0");

  if (decide(c, "ns", "web", NULL, 0, &d, &err)) {
    CHECK(d.status == CDPLACE_CODE_SKIP && !d.has_node_set, "web: status %d, node set %s", d.status, node_set(&d));
  } else expect_ok(err, "pre_filter web");

  /* p0 binds to tray-0: cd runs in clique 1, p1 may only go there. */
  b = batch();
  pod(&b, "ns", "p0", "cd-channel", "tray-0");
  apply(c, &b, "bind p0");
  if (decide(c, "ns", "p1", NULL, 0, &d, &err)) {
    CHECK(d.status == CDPLACE_CODE_SUCCESS && d.exclusive, "p1: status %d exclusive %d", d.status, d.exclusive);
    CHECK(strcmp(node_set(&d), "tray-0,tray-1") == 0, "p1 node set: %s", node_set(&d));
  } else expect_ok(err, "pre_filter p1");

  /* A second domain of two pods: one free tray per clique, so it must wait. */
  b = batch();
  domain(&b, "ns", "cd2", "uid-2", 2);
  template(&b, "ns", "cd2-channel", "uid-2");
  pod(&b, "ns", "q0", "cd2-channel", NULL);
  apply(c, &b, "apply cd2");
  if (decide(c, "ns", "q0", NULL, 0, &d, &err)) {
    CHECK(d.status == CDPLACE_CODE_UNSCHEDULABLE, "q0 status %d", d.status);
    CHECK(!d.has_node_set, "q0 has no node set: %s", node_set(&d));
  } else expect_ok(err, "pre_filter q0");

  /* Gang preemption: cd has the same priority as cd2, so nothing may be evicted for q0. */
  cdplace_bytes_t pj = {0};
  expect_ok(cdplace_cluster_preempt(c, "ns", 2, "q0", 2, &pj), "preempt q0");
  char *pjs = calloc(pj.len + 1, 1);
  memcpy(pjs, pj.data, pj.len);
  CHECK(strstr(pjs, "\"domain\":\"uid-2\",\"plan\":null") != NULL && strstr(pjs, "no lower-priority domains") != NULL,
        "preempt q0: %s", pjs);
  free(pjs);
  cdplace_bytes_delete(&pj);
  expect_kind(cdplace_cluster_preempt(c, "ns", 2, "ghost", 5, &pj), CDPLACE_ERROR_UNKNOWN_POD, "preempt ghost");
  expect_kind(cdplace_cluster_preempt(c, "ns", 2, "q0", 2, NULL), CDPLACE_ERROR_BAD_CALL, "preempt without out");

  /* The fleet status: cd has started in clique 1 (one of two placed), cd2 waits for 2 trays. */
  cdplace_bytes_t fj = {0};
  expect_ok(cdplace_cluster_status(c, &fj), "status");
  char *fjs = calloc(fj.len + 1, 1);
  memcpy(fjs, fj.data, fj.len);
  CHECK(strstr(fjs, "{\"clique\":\"abc-123.1\",\"usable\":2,\"free\":1,\"promised\":1,\"reservedFor\":null}") != NULL,
        "status clique 1: %s", fjs);
  CHECK(strstr(fjs, "\"uid\":\"uid-1\",\"namespace\":\"ns\",\"name\":\"cd\",\"phase\":\"starting\"") != NULL,
        "status cd: %s", fjs);
  CHECK(strstr(fjs, "\"uid\":\"uid-2\",\"namespace\":\"ns\",\"name\":\"cd2\",\"phase\":\"pending\",\"pending\":\"waiting_for_trays\"") != NULL,
        "status cd2: %s", fjs);
  free(fjs);
  cdplace_bytes_delete(&fj);
  expect_kind(cdplace_cluster_status(c, NULL), CDPLACE_ERROR_BAD_CALL, "status without out");

  /* As if p0 were preempted (packed overlay): clique 1 is free again. */
  batch_t o = {0};
  u32(&o, 1); u8(&o, 1); str(&o, "ns"); str(&o, "p0"); str(&o, "");
  if (decide(c, "ns", "q0", o.data, o.len, &d, &err)) {
    CHECK(d.status == CDPLACE_CODE_SUCCESS, "q0 with p0 removed: status %d", d.status);
    CHECK(strcmp(node_set(&d), "tray-0,tray-1") == 0, "q0 node set with p0 removed: %s", node_set(&d));
  } else expect_ok(err, "pre_filter q0 with overlay");
  o.data[4] = 9; /* op 9 */
  decide(c, "ns", "q0", o.data, o.len, &d, &err);
  m = message(err);
  CHECK(strcmp(m, "malformed overlay: record 0 at byte 4: op: 9 is neither 1 (remove) nor 2 (add)") == 0, "overlay error: %s", m);
  free(m);
  expect_kind(err, CDPLACE_ERROR_BAD_CALL, "malformed overlay");
  free(o.data);

  /* Reserve and Unreserve. */
  expect_ok(cdplace_cluster_assume(c, "ns", 2, "p1", 2, "tray-1", 6), "assume");
  expect_ok(cdplace_cluster_forget(c, "ns", 2, "p1", 2), "forget");
  expect_kind(cdplace_cluster_assume(c, "ns", 2, "ghost", 5, "tray-1", 6), CDPLACE_ERROR_UNKNOWN_POD, "assume ghost");

  /* Stats: the instance of the decisions above is idle; nothing is quarantined. */
  cdplace_stats_t stats = {0};
  expect_ok(cdplace_cluster_stats(c, &stats), "stats");
  CHECK(stats.idle_instances >= 1 && stats.busy_instances == 0 && stats.quarantined_objects == 0,
        "stats: idle %llu busy %llu quarantined %llu", (unsigned long long)stats.idle_instances,
        (unsigned long long)stats.busy_instances, (unsigned long long)stats.quarantined_objects);
  expect_kind(cdplace_cluster_stats(c, NULL), CDPLACE_ERROR_BAD_CALL, "stats without out");
  cdplace_bytes_t q = {0};
  expect_ok(cdplace_cluster_take_quarantined(c, &q), "take_quarantined");
  CHECK(q.len == 2 && memcmp(q.data, "[]", 2) == 0, "quarantined: %.*s", (int)q.len, (const char *)q.data);
  cdplace_bytes_delete(&q);

  /* A remove record. */
  b = batch();
  record(&b, 2, CDPLACE_KIND_POD); str(&b, "ns"); str(&b, "web");
  apply(c, &b, "remove web");
  decide(c, "ns", "web", NULL, 0, &d, &err);
  expect_kind(err, CDPLACE_ERROR_UNKNOWN_POD, "removed pod");

  /* A malformed batch applies nothing: the node in record 0 does not appear. */
  b = batch();
  node(&b, "tray-9", "abc-123.9");
  record(&b, 1, (cdplace_kind_t)42);
  done(&b);
  err = cdplace_cluster_apply_facts(c, b.data, b.len);
  m = message(err);
  CHECK(strcmp(m, "malformed facts batch: record 1 at byte 41: kind: 42 is not a cdplace_kind_t (1..=8)") == 0,
        "batch error: %s", m);
  free(m);
  expect_kind(err, CDPLACE_ERROR_BAD_CALL, "malformed batch");
  free(b.data);
  if (decide(c, "ns", "q0", NULL, 0, &d, &err)) {
    CHECK(clique_code(&d, "abc-123.9") == -1, "tray-9 was not applied");
  } else expect_ok(err, "pre_filter after a malformed batch");

  /* Plain-pod steering: one answer for every plain pod; the fleet has cliques, so Success with
   * nodes outside the cliques open (other Success) and no node set. */
  {
    cdplace_bytes_t out = {0};
    char scratch[256];
    expect_ok(cdplace_cluster_steer(c, 1, &out, NULL), "steer");
    cursor_t cur = {out.data, out.len, 0};
    CHECK(out.len >= 4 && memcmp(out.data, "CDP4", 4) == 0, "steer magic");
    cur.p += 4; cur.left -= 4;
    uint32_t nreasons = rd_u32(&cur);
    for (uint32_t i = 0; i < nreasons && !cur.bad; i++) rd_str(&cur, scratch, sizeof scratch);
    CHECK(rd_u8(&cur) == CDPLACE_CODE_SUCCESS, "steer status");
    rd_u32(&cur);
    CHECK(rd_u8(&cur) == 0 && rd_u8(&cur) == 0, "steer: no domain, not exclusive");
    CHECK(rd_u8(&cur) == CDPLACE_CODE_SUCCESS, "steer: nodes outside the cliques pass");
    rd_u32(&cur);
    CHECK(rd_u32(&cur) == 100, "steer: nodes outside the cliques score highest");
    cdplace_bytes_delete(&out);
    expect_kind(cdplace_cluster_steer(c, 2, &out, NULL), CDPLACE_ERROR_BAD_CALL, "steer gpus 2");
    expect_kind(cdplace_cluster_steer(c, 1, NULL, NULL), CDPLACE_ERROR_BAD_CALL, "steer NULL out");
  }

  /* Bad calls are errors, not crashes. */
  expect_kind(cdplace_cluster_apply_facts(NULL, (const uint8_t *)"CDF3", 4), CDPLACE_ERROR_BAD_CALL, "NULL cluster");
  expect_kind(cdplace_cluster_apply_facts(c, NULL, 8), CDPLACE_ERROR_BAD_CALL, "NULL facts");
  expect_kind(cdplace_cluster_pre_filter(c, "ns", 2, "p1", 2, NULL, 0, NULL, NULL), CDPLACE_ERROR_BAD_CALL, "NULL out");
  expect_kind(cdplace_cluster_forget(c, "\xff", 1, "p", 1), CDPLACE_ERROR_BAD_CALL, "bad UTF-8");
  cdplace_cluster_delete(c);
}

/* A faulty cluster with a pod that triggers the fault and one that does not. */
static cdplace_cluster_t *faulty(cdplace_runtime_t *rt, const char *args) {
  cdplace_cluster_t *c = NULL;
  expect_ok(cdplace_cluster_new(rt, args, strlen(args), &c), args);
  batch_t b = batch();
  pod(&b, "fault", "p", NULL, NULL);
  pod(&b, "ok", "p", NULL, NULL);
  apply(c, &b, "faulty pods");
  return c;
}

static void fault_checks(cdplace_runtime_t *rt) {
  struct { const char *args; cdplace_error_kind_t kind; const char *prefix; } cases[] = {
      {"\"trap\"", CDPLACE_ERROR_TRAP, "policy guest trapped: unreachable executed (the guest panicked)"},
      {"{\"fault\": \"loop\", \"guestCallTimeout\": \"50ms\"}", CDPLACE_ERROR_TIMEOUT, "policy guest exceeded its deadline of 50ms"},
      {"{\"fault\": \"oom\", \"guestMemoryLimitMiB\": 16}", CDPLACE_ERROR_OUT_OF_MEMORY,
       "policy guest exceeded its memory limit of 16777216 bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cdplace_cluster_t *c = faulty(rt, cases[i].args);
    for (int round = 0; round < 2; round++) {
      decision_t d;
      cdplace_error_t *err;
      decide(c, "fault", "p", NULL, 0, &d, &err);
      char *m = message(err);
      CHECK(strncmp(m, cases[i].prefix, strlen(cases[i].prefix)) == 0, "%s: message %s", cases[i].args, m);
      free(m);
      expect_kind(err, cases[i].kind, cases[i].args);
      /* The broken instance was discarded: a fresh one serves the next pod. */
      if (decide(c, "ok", "p", NULL, 0, &d, &err)) CHECK(d.status == CDPLACE_CODE_SKIP, "%s: ok/p after the fault", cases[i].args);
      else expect_ok(err, "ok/p after a fault");
    }
    cdplace_cluster_delete(c);
  }
}

/* Swapping the policy: the same component again is checked and takes over (generation 2, the
 * decision says so); the faulty component answers other host settings and is refused, naming
 * the check, and the guest's policy still decides. */
static void swap_checks(cdplace_runtime_t *rt, cdplace_runtime_t *bad) {
  cdplace_cluster_t *c = NULL;
  expect_ok(cdplace_cluster_new(rt, "{}", 2, &c), "swap cluster");
  batch_t b = batch();
  node(&b, "tray-1", "abc-123.1");
  domain(&b, "ns", "cd", "uid-1", 1);
  template(&b, "ns", "t", "uid-1");
  pod(&b, "ns", "p0", "t", NULL);
  apply(c, &b, "swap view");
  uint64_t g = 0;
  expect_ok(cdplace_cluster_policy_generation(c, &g), "policy generation");
  CHECK(g == 1, "first generation %llu", (unsigned long long)g);
  cdplace_bytes_t report = {0};
  expect_ok(cdplace_cluster_swap(c, rt, &report), "swap to the same component");
  CHECK(report.len > 0 && strstr((const char *)report.data, "\"generation\":2") != NULL &&
            strstr((const char *)report.data, "\"pendingDomains\":1") != NULL,
        "swap report %.*s", (int)report.len, (const char *)report.data);
  cdplace_bytes_delete(&report);
  cdplace_bytes_t out = {0};
  g = 0;
  expect_ok(cdplace_cluster_pre_filter(c, "ns", 2, "p0", 2, NULL, 0, &out, &g), "pre_filter after the swap");
  CHECK(g == 2, "decided by generation %llu", (unsigned long long)g);
  cdplace_bytes_delete(&out);
  cdplace_error_t *err = cdplace_cluster_swap(c, bad, &report);
  char *m = message(err);
  CHECK(strncmp(m, "policy refused (settings): ", 27) == 0 && strstr(m, "plainPodSteering") != NULL, "refusal %s", m);
  free(m);
  expect_kind(err, CDPLACE_ERROR_REFUSED, "swap to the faulty component");
  expect_ok(cdplace_cluster_policy_generation(c, &g), "policy generation after a refusal");
  CHECK(g == 2, "a refused swap keeps generation 2, not %llu", (unsigned long long)g);
  expect_kind(cdplace_cluster_swap(c, NULL, &report), CDPLACE_ERROR_BAD_CALL, "swap NULL runtime");
  expect_kind(cdplace_cluster_swap(c, rt, NULL), CDPLACE_ERROR_BAD_CALL, "swap NULL report");
  cdplace_cluster_delete(c);
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: smoke GUEST.wasm FAULTY.wasm\n"); return 2; }
  size_t len;
  cdplace_runtime_t *rt = NULL;
  expect_kind(cdplace_runtime_new((const uint8_t *)"nope", 4, &rt), CDPLACE_ERROR_LOAD, "not a component");

  CHECK(cdplace_abi_version() == CDPLACE_ABI_VERSION, "library ABI %u, header %d", cdplace_abi_version(),
        CDPLACE_ABI_VERSION);

  unsigned char *wasm = slurp(argv[1], &len);
  expect_ok(cdplace_runtime_new(wasm, len, &rt), "runtime_new");
  free(wasm);
  if (rt) policy_checks(rt);

  wasm = slurp(argv[2], &len);
  cdplace_runtime_t *bad = NULL;
  expect_ok(cdplace_runtime_new(wasm, len, &bad), "faulty runtime");
  free(wasm);
  if (bad) fault_checks(bad);
  if (rt && bad) swap_checks(rt, bad);
  cdplace_runtime_delete(rt);
  cdplace_runtime_delete(bad);

  if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
  printf("c-abi smoke: all checks passed\n");
  return 0;
}
