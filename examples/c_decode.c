/* examples/c_decode.c — the C interface (kascade/c_api.h) from plain C: a CPU backend, a Kascade policy
 * (anchors 0 and 2 of 4 layers), one decode step of one sequence over a one-page cache, and the library's
 * refusal of an unknown policy name with its message. Prints the layer roles and the share of keys read.
 * Built and run against an installed kascade by tests/scripts/test_install.sh. */
#include <stdio.h>
#include <stdlib.h>

#include "kascade/c_api.h"

enum { LAYERS = 4, H = 4, G = 2, D = 16, N = 400 };

static int check(int32_t status, const char* what) {
  if (status != KASCADE_OK) {
    fprintf(stderr, "c_decode: %s: %s\n", what, kascade_last_error());
    exit(1);
  }
  return 0;
}

int main(void) {
  static float k[N * G * D], v[N * G * D], q[H * D], o[H * D];
  unsigned seed = 12345u;
  for (int i = 0; i < N * G * D; ++i) {
    seed = seed * 1103515245u + 12345u;
    k[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    v[i] = -k[i];
  }
  for (int i = 0; i < H * D; ++i) q[i] = (float)(i % 7) / 7.0f;
  const int32_t block_table[1] = {0}, kv_lens[1] = {N}, q_lens[1] = {1}, cu_q_lens[2] = {0, 1};
  const int32_t anchors[2] = {0, 2};

  kascade_backend* backend = NULL;
  check(kascade_backend_cpu(&backend), "kascade_backend_cpu");
  kascade_policy_config config;
  kascade_policy_config_init(&config);
  config.name = "no-such-policy";
  config.num_layers = LAYERS;
  config.num_heads = H;
  config.num_kv_heads = G;
  config.head_dim = D;
  config.k_min = 16; /* so k(400) = 40, a tenth of the keys */
  kascade_policy* policy = NULL;
  if (kascade_policy_create(backend, &config, &policy) != KASCADE_INVALID_ARGUMENT) return 1;
  printf("refused as expected: %s\n", kascade_last_error());

  config.name = "kascade";
  config.anchors = anchors;
  config.num_anchors = 2;
  check(kascade_policy_create(backend, &config, &policy), "kascade_policy_create");
  check(kascade_policy_begin_forward(policy, KASCADE_DECODE, 1, q_lens, kv_lens), "begin_forward");
  const kascade_query query = {q, KASCADE_F32, 1, 1, H, D, cu_q_lens};
  const kascade_paged_kv cache = {k, v, KASCADE_F32, 1, N, G, D, block_table, 1, kv_lens};
  static const char* roles[] = {"dense", "dense-anchor", "anchor", "reuse"};
  for (int layer = 0; layer < LAYERS; ++layer) {
    check(kascade_policy_attention(policy, layer, &query, &cache, 0.25f, o, NULL), "attention");
    int32_t role = 0;
    int64_t attended = 0, causal = 0;
    check(kascade_policy_layer_role(policy, layer, KASCADE_DECODE, &role), "layer_role");
    check(kascade_policy_keys_attended(policy, KASCADE_DECODE, layer, &attended, &causal), "keys_attended");
    printf("layer %d: %s, keys read %.3f\n", layer, roles[role], (double)attended / (double)causal);
  }
  kascade_policy_destroy(policy);
  kascade_backend_destroy(backend);
  return 0;
}
