/* Drives the C ABI from C, as a cgo caller would: load the component, feed objects, decide,
 * and check error reporting. Usage: smoke GUEST.wasm FAULTY.wasm. Exit 0 when every check holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdplace.h"

static int failures = 0;
#define CHECK(cond, ...)                       \
  do {                                         \
    if (!(cond)) {                             \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);            \
      fputc('\n', stderr);                     \
      failures++;                              \
    }                                          \
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

static char *message(cdplace_error_t *err) {
  size_t n = cdplace_error_message(err, NULL, 0);
  char *buf = calloc(n + 1, 1);
  cdplace_error_message(err, (uint8_t *)buf, n);
  return buf;
}

static void apply(cdplace_cluster_t *c, const char *json) {
  bool read = false;
  cdplace_error_t *err = cdplace_cluster_apply(c, json, strlen(json), &read);
  CHECK(err == NULL && read, "apply %s", json);
  if (err) cdplace_error_delete(err);
}

static char *decide(cdplace_cluster_t *c, const char *ns, const char *name, cdplace_error_t **err) {
  cdplace_bytes_t out = {0};
  *err = cdplace_cluster_pre_filter(c, ns, strlen(ns), name, strlen(name), "", 0, &out);
  if (*err) return NULL;
  char *s = calloc(out.len + 1, 1);
  memcpy(s, out.data, out.len);
  cdplace_bytes_delete(&out);
  CHECK(out.data == NULL && out.len == 0, "bytes_delete resets");
  return s;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: smoke GUEST.wasm FAULTY.wasm\n"); return 2; }
  size_t len;
  unsigned char *wasm = slurp(argv[1], &len);
  cdplace_runtime_t *rt = NULL;
  cdplace_error_t *err = cdplace_runtime_new(wasm, len, 0, 0, &rt);
  CHECK(err == NULL && rt != NULL, "runtime_new");
  free(wasm);

  /* Bad arguments: exact kind and message. */
  cdplace_cluster_t *c = NULL;
  const char *bad = "{\"reserveTraysPerClique\": 40}";
  err = cdplace_cluster_new(rt, bad, strlen(bad), &c);
  CHECK(err != NULL && cdplace_error_kind(err) == CDPLACE_ERROR_INVALID_ARGS, "bad args kind");
  if (err) {
    char *m = message(err);
    CHECK(strcmp(m, "invalid plugin args: reserveTraysPerClique: Invalid value: \"40\": must be less than maxTraysPerClique (18)") == 0, "bad args message: %s", m);
    free(m);
    cdplace_error_delete(err);
  }

  err = cdplace_cluster_new(rt, "", 0, &c);
  CHECK(err == NULL && c != NULL, "cluster_new");
  apply(c, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"tray-0\",\"labels\":{\"nvidia.com/gpu.clique\":\"abc-123.1\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"4\"}}}");
  apply(c, "{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"ComputeDomain\",\"metadata\":{\"name\":\"cd\",\"namespace\":\"ns\",\"uid\":\"uid-1\"},\"spec\":{\"numNodes\":0,\"channel\":{\"resourceClaimTemplate\":{\"name\":\"cd-channel\"}}}}");
  apply(c, "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":{\"name\":\"cd-channel\",\"namespace\":\"ns\",\"labels\":{\"resource.nvidia.com/computeDomain\":\"uid-1\"}},\"spec\":{\"spec\":{}}}");
  apply(c, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}],\"resourceClaims\":[{\"name\":\"channel\",\"resourceClaimTemplateName\":\"cd-channel\"}]}}");

  char *d = decide(c, "ns", "p", &err);
  CHECK(err == NULL && d != NULL, "pre_filter");
  if (d) {
    CHECK(strstr(d, "\"status\":{\"code\":\"Success\"") != NULL, "decision status: %s", d);
    CHECK(strstr(d, "\"abc-123.1\":{\"code\":\"Success\",\"reason\":\"\",\"score\":100}") != NULL, "clique verdict: %s", d);
    CHECK(strstr(d, "\"domain\":\"uid-1\"") != NULL, "domain: %s", d);
    free(d);
  }

  /* Reserve and Unreserve through the ABI. */
  err = cdplace_cluster_assume(c, "ns", 2, "p", 1, "tray-0", 6);
  CHECK(err == NULL, "assume");
  err = cdplace_cluster_forget(c, "ns", 2, "p", 1);
  CHECK(err == NULL, "forget");

  /* Unknown pod and bad calls are errors, not crashes. */
  d = decide(c, "ns", "ghost", &err);
  CHECK(err != NULL && cdplace_error_kind(err) == CDPLACE_ERROR_UNKNOWN_POD, "unknown pod");
  if (err) cdplace_error_delete(err);
  err = cdplace_cluster_remove(c, "Gadget", 6, "", 0, "x", 1);
  CHECK(err != NULL && cdplace_error_kind(err) == CDPLACE_ERROR_BAD_CALL, "unknown kind");
  if (err) cdplace_error_delete(err);
  err = cdplace_cluster_apply(NULL, "{}", 2, NULL);
  CHECK(err != NULL && cdplace_error_kind(err) == CDPLACE_ERROR_BAD_CALL, "NULL cluster");
  if (err) cdplace_error_delete(err);
  err = cdplace_cluster_apply(c, "{not json", 9, NULL);
  CHECK(err != NULL && cdplace_error_kind(err) == CDPLACE_ERROR_INVALID_OBJECT, "not json");
  if (err) cdplace_error_delete(err);
  cdplace_cluster_delete(c);
  cdplace_runtime_delete(rt);

  /* A trapping guest: an error result, and the process lives on. */
  wasm = slurp(argv[2], &len);
  err = cdplace_runtime_new(wasm, len, 0, 0, &rt);
  free(wasm);
  CHECK(err == NULL, "faulty runtime");
  err = cdplace_cluster_new(rt, "\"trap\"", 6, &c);
  CHECK(err == NULL, "faulty cluster");
  apply(c, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"fault\"},\"spec\":{\"containers\":[]}}");
  for (int i = 0; i < 3; i++) {
    d = decide(c, "fault", "p", &err);
    CHECK(err != NULL && cdplace_error_kind(err) == CDPLACE_ERROR_TRAP, "trap kind");
    if (err) cdplace_error_delete(err);
  }
  cdplace_cluster_delete(c);
  cdplace_runtime_delete(rt);

  if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
  printf("c-abi smoke: all checks passed\n");
  return 0;
}
