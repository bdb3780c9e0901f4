/* model_driver.c -- the C side of tests/parity/test_model.py: a tiny program
 * the test compiles against build/libffn.a.  It exchanges raw little-endian
 * files with the Python side.
 *
 *   model_driver table CONFIG.json
 *       prints the tensor table: "name offset numel rows cols" per line.
 *   model_driver run CONFIG.json PARAMS.f32 TOKENS.i32 TARGETS.i32 B T OUTDIR THREADS
 *       loads the flat parameter block, then writes to OUTDIR:
 *         logits.f32   (B, T, V)   ffn_model_logits
 *         grads.f32    (n_params)  after ffn_model_forward_backward (grad_scale 1)
 *         loss.txt     "total ce aux z n_targets eval_total"
 *         steps.f32    (T, V)      sequence 0 decoded one token at a time (KV cache)
 *         prefill.f32  (T, V)      sequence 0: a prefill of T/2 tokens, then steps
 *                                   (the first T/2 - 1 rows are zero)
 *       and the taps (include/ffn/tap.h) of a forward on the same batch:
 *         tap_<name>.f32      (B·T, W) each captured point below that exists
 *                             (layers.0.{attn_out,mlp_in,m,mlp_out},
 *                             layers.{L-1}.resid_post)
 *         tap_logits.f32      (B, T, V) the logits of that forward
 *         zero_logits.f32     (B, T, V) with layers.0.m index 3 set to 0 at
 *                             every position (when layer 0 has an FFN)
 *         steer_logits.f32    (B, T, V) with steer(d) = 0.5·sin(d + 1) added
 *                             to layers.0.resid_post at every position
 * Exit code 0 on success, 1 with a message on stderr. */
#include <ffn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "model_driver: %s: %s\n", what, ffn_last_error());
    return 1;
}

static void *read_file(const char *path, size_t expect) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = malloc(expect ? expect : 1);
    size_t got = fread(buf, 1, expect, f);
    fclose(f);
    if (got != expect) {
        fprintf(stderr, "model_driver: %s: expected %zu bytes, read %zu\n", path, expect, got);
        free(buf);
        return NULL;
    }
    return buf;
}

static int write_file(const char *dir, const char *name, const void *p, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes) {
        fprintf(stderr, "model_driver: cannot write %s\n", path);
        if (f) fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: model_driver table|run CONFIG.json ...\n");
        return 2;
    }
    ffn_model_config cfg;
    if (ffn_model_config_load(argv[2], &cfg)) return fail("config");
    if (!strcmp(argv[1], "table")) {
        ffn_ctx *ctx;
        ffn_model *m;
        if (ffn_ctx_create(1, &ctx) || ffn_model_create(ctx, &cfg, NULL, &m)) return fail("create");
        for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
            const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
            printf("%s %lld %lld %lld %lld\n", t->name, (long long)t->offset, (long long)t->numel,
                   (long long)t->shape[0], (long long)t->shape[1]);
        }
        ffn_model_free(m);
        ffn_ctx_free(ctx);
        return 0;
    }
    if (strcmp(argv[1], "run") || argc != 10) {
        fprintf(stderr, "usage: model_driver run CONFIG PARAMS TOKENS TARGETS B T OUTDIR THREADS\n");
        return 2;
    }
    int64_t B = atoll(argv[6]), T = atoll(argv[7]), V = cfg.vocab_size;
    const char *out = argv[8];
    ffn_ctx *ctx;
    ffn_model *m;
    ffn_model_options opt = {.max_batch = B, .max_seq = T, .training = 1};
    if (ffn_ctx_create(atoi(argv[9]), &ctx) || ffn_model_create(ctx, &cfg, &opt, &m))
        return fail("create");
    int64_t n;
    float *params = ffn_model_params(m, &n);
    float *loaded = read_file(argv[3], (size_t)n * sizeof(float));
    int32_t *tokens = read_file(argv[4], (size_t)(B * T) * sizeof(int32_t));
    int32_t *targets = read_file(argv[5], (size_t)(B * T) * sizeof(int32_t));
    if (!loaded || !tokens || !targets) {
        fprintf(stderr, "model_driver: cannot read the input files\n");
        return 1;
    }
    memcpy(params, loaded, (size_t)n * sizeof(float));
    if (ffn_model_params_changed(m)) return fail("params_changed");

    float *logits = calloc((size_t)(B * T * V), sizeof(float));
    if (ffn_model_logits(m, logits, tokens, B, T)) return fail("logits");
    if (write_file(out, "logits.f32", logits, (size_t)(B * T * V) * sizeof(float))) return 1;

    /* taps: captures, then two interventions, one at a time */
    char names[5][64];
    snprintf(names[0], 64, "layers.0.attn_out");
    snprintf(names[1], 64, "layers.0.mlp_in");
    snprintf(names[2], 64, "layers.0.m");
    snprintf(names[3], 64, "layers.0.mlp_out");
    snprintf(names[4], 64, "layers.%lld.resid_post", (long long)(cfg.num_hidden_layers - 1));
    for (int i = 0; i < 5; i++)
        if (!ffn_model_tap_lookup(m, names[i], NULL, NULL, NULL) && ffn_model_tap_select(m, names[i]))
            return fail("tap select");
    if (ffn_model_logits(m, logits, tokens, B, T)) return fail("tapped logits");
    if (write_file(out, "tap_logits.f32", logits, (size_t)(B * T * V) * sizeof(float))) return 1;
    for (int i = 0; i < 5; i++) {
        ffn_tap_view v;
        if (ffn_model_tap_lookup(m, names[i], NULL, NULL, NULL)) continue;
        if (ffn_model_tap_read(m, names[i], &v)) return fail("tap read");
        char file[96];
        snprintf(file, sizeof file, "tap_%s.f32", names[i]);
        if (write_file(out, file, v.data, (size_t)(v.rows * v.cols) * sizeof(float))) return 1;
    }
    ffn_model_taps_clear(m);
    if (!ffn_model_tap_lookup(m, "layers.0.m", NULL, NULL, NULL)) {
        if (ffn_model_tap_patch(m, "layers.0.m", -1, 3, FFN_TAP_OP_SET, 0.0f) ||
            ffn_model_logits(m, logits, tokens, B, T))
            return fail("zero neuron");
        if (write_file(out, "zero_logits.f32", logits, (size_t)(B * T * V) * sizeof(float)))
            return 1;
        ffn_model_taps_clear(m);
    }
    float *steer = malloc((size_t)cfg.hidden_size * sizeof *steer);
    for (int64_t d = 0; d < cfg.hidden_size; d++) steer[d] = 0.5f * sinf((float)(d + 1));
    if (ffn_model_tap_patch_vector(m, "layers.0.resid_post", -1, FFN_TAP_OP_ADD, steer,
                                   cfg.hidden_size) ||
        ffn_model_logits(m, logits, tokens, B, T))
        return fail("steer");
    if (write_file(out, "steer_logits.f32", logits, (size_t)(B * T * V) * sizeof(float))) return 1;
    ffn_model_taps_clear(m);
    free(steer);

    ffn_model_zero_grads(m);
    ffn_model_loss loss, ev;
    if (ffn_model_forward_backward(m, tokens, targets, B, T, 1.0f, &loss)) return fail("fb");
    if (ffn_model_eval_loss(m, tokens, targets, B, T, &ev)) return fail("eval");
    float *grads = ffn_model_grads(m, NULL);
    if (write_file(out, "grads.f32", grads, (size_t)n * sizeof(float))) return 1;
    char text[256];
    int len = snprintf(text, sizeof text, "%.10g %.10g %.10g %.10g %lld %.10g\n", loss.total,
                       loss.ce, loss.aux, loss.z, (long long)loss.n_targets, ev.total);
    if (write_file(out, "loss.txt", text, (size_t)len)) return 1;

    float *steps = calloc((size_t)(T * V), sizeof(float));
    ffn_model_reset(m);
    for (int64_t t = 0; t < T; t++)
        if (ffn_model_step(m, tokens[t], steps + t * V)) return fail("step");
    if (write_file(out, "steps.f32", steps, (size_t)(T * V) * sizeof(float))) return 1;
    memset(steps, 0, (size_t)(T * V) * sizeof(float));
    ffn_model_reset(m);
    int64_t half = T / 2 > 0 ? T / 2 : 1;
    if (ffn_model_prefill(m, tokens, half, steps + (half - 1) * V)) return fail("prefill");
    for (int64_t t = half; t < T; t++)
        if (ffn_model_step(m, tokens[t], steps + t * V)) return fail("step");
    if (write_file(out, "prefill.f32", steps, (size_t)(T * V) * sizeof(float))) return 1;

    free(steps);
    free(logits);
    free(loaded);
    free(tokens);
    free(targets);
    ffn_model_free(m);
    ffn_ctx_free(ctx);
    return 0;
}
