/* test_gguf_mmap.c -- GGUF models whose matrices are read from the mapped
 * file (src/load/gguf_model.c with ffn_model_options.low_precision):
 *   - for f16, bf16, q8_0, q4_0, q4_K, q6_K and two small random models
 *     (llama with GQA and a tied head; Mixtral-style MoE, untied), a model
 *     quantized in memory, written as GGUF and loaded from the file gives
 *     the in-memory model's logits bit for bit;
 *   - loaded from the file, every matrix but the llama q/k projections
 *     (their rows are permuted on load, so copied) is borrowed from the
 *     mapping, every matrix keeps the file's type;
 *   - loaded from a buffer (the copied path; the buffer is overwritten and
 *     freed right after loading) nothing is borrowed and the logits equal
 *     the mapped ones bit for bit;
 *   - the file unlinked after loading: the model still runs (it keeps its
 *     mapping) with the same logits; freeing the model closes it (ASan's
 *     leak check sees the mapping's bookkeeping go);
 *   - the mapped model written again as GGUF of its own type gives the
 *     same file byte for byte (the writer copies the bytes as they are,
 *     q/k rows moved back), and as f32 the decoded values;
 *   - an f32 file borrows nothing (fp32 matrices live in the flat block);
 *   - routers stay f32 in the file (the in-memory model keeps them f32 too). */
#include "check.h"

#include <ffn.h>
#include "load/gguf_model.h"
#include "nn/model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T = 6 };
static const int32_t toks[T] = {3, 17, 60, 1, 42, 5};

static void cfg_llama(ffn_model_config *c) {
    ffn_model_config_default(c);
    c->vocab_size = 67;
    c->hidden_size = 256;
    c->intermediate_size = 512;
    c->num_hidden_layers = 2;
    c->num_attention_heads = 4;
    c->num_key_value_heads = 2;
    c->max_position_embeddings = 16;
    c->tie_word_embeddings = 1;
    c->hidden_act = FFN_ACT_SILU;
    c->mlp_type = FFN_MODEL_MLP_GATED;
    c->rope_style = FFN_ROPE_HALF;
}

static void cfg_mixtral(ffn_model_config *c) {
    cfg_llama(c);
    c->tie_word_embeddings = 0;
    c->num_experts = 4;
    c->num_experts_per_tok = 2;
    c->moe_intermediate_size = 256;
    c->moe_layer_freq = 1;
    c->norm_topk_prob = 1;
}

static float *logits_of(ffn_model *m, int64_t V) {
    float *z = malloc((size_t)(T * V) * sizeof *z);
    if (z && ffn_model_logits(m, z, toks, 1, T) != FFN_OK) {
        fprintf(stderr, "logits: %s\n", ffn_last_error());
        free(z);
        return NULL;
    }
    return z;
}

static void *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    void *x = read_all(a, &na), *y = read_all(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* Matrices of m whose bytes are expected to be borrowed from a mapped file. */
static int expected_borrowed(const ffn_model *m) {
    int n = 0;
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        if (t->kind == FFN_TENSOR_NORM || t->kind == FFN_TENSOR_ATTN_BIAS ||
            t->kind == FFN_TENSOR_MLP_BIAS || t->kind == FFN_TENSOR_ROUTER)
            continue;
        if (strstr(t->name, "q_proj") || strstr(t->name, "k_proj")) continue;
        n++;
    }
    return n;
}

static void run_case(ffn_ctx *ctx, const char *name, void (*config)(ffn_model_config *),
                     ffn_ggml_type type, const char *dir) {
    const char *tn = ffn_ggml_type_name(type);
    ffn_model_config c;
    config(&c);
    ffn_model_options o = {.max_batch = 1, .max_seq = 16, .low_precision = 1};
    ffn_model *m0 = NULL, *m1 = NULL, *m2 = NULL;
    CHECK(ffn_model_create(ctx, &c, &o, &m0) == FFN_OK, "%s", ffn_last_error());
    if (!m0) return;
    CHECK(ffn_model_init_weights(m0, 11) == FFN_OK, "%s", ffn_last_error());
    /* the writer keeps routers (ffn_gate_inp) f32, as llama.cpp does */
    ffn_quantize_options qo;
    ffn_quantize_options_default(&qo);
    qo.router = FFN_GGML_TYPE_F32;
    if (type != FFN_GGML_TYPE_F32)
        CHECK(ffn_model_quantize(m0, type, &qo) == FFN_OK, "%s %s: %s", name, tn, ffn_last_error());
    char path[512], path2[512];
    snprintf(path, sizeof path, "%s/%s_%s.gguf", dir, name, tn);
    snprintf(path2, sizeof path2, "%s/%s_%s.again.gguf", dir, name, tn);
    ffn_gguf_save_options so;
    ffn_gguf_save_options_default(&so);
    so.type = type;
    CHECK(ffn_gguf_save_model(m0, path, &so, NULL) == FFN_OK, "%s %s: %s", name, tn, ffn_last_error());
    const int64_t V = c.vocab_size;
    float *z0 = logits_of(m0, V);

    /* the mapped path */
    CHECK(ffn_gguf_load_model(ctx, path, &o, &m1, NULL) == FFN_OK, "%s %s: %s", name, tn,
          ffn_last_error());
    /* the copied path: a buffer overwritten and freed once loaded */
    size_t n = 0;
    void *buf = read_all(path, &n);
    CHECK(buf != NULL, "read %s", path);
    if (buf) {
        CHECK(gguf_model_load_buffer(ctx, buf, n, path, &o, &m2) == FFN_OK, "%s %s: %s", name, tn,
              ffn_last_error());
        memset(buf, 0xA5, n);
        free(buf);
    }
    if (!m1 || !m2 || !z0) goto done;
    const int want = type == FFN_GGML_TYPE_F32 ? 0 : expected_borrowed(m1);
    CHECK(model_q_borrowed(m1) == want, "%s %s: %d matrices borrowed from the mapping, expected %d",
          name, tn, model_q_borrowed(m1), want);
    CHECK(model_q_borrowed(m2) == 0, "%s %s: %d borrowed from a buffer", name, tn,
          model_q_borrowed(m2));
    int types_ok = 1;
    for (int64_t i = 0; i < ffn_model_num_tensors(m1); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m1, i);
        if (t->kind == FFN_TENSOR_NORM || t->kind == FFN_TENSOR_ROUTER) continue;
        types_ok &= ffn_model_tensor_type(m1, t->name) == (int)type;
    }
    CHECK(types_ok, "%s %s: a matrix of the mapped model is not %s", name, tn, tn);
    CHECK(unlink(path) == 0, "unlink %s", path);
    float *z1 = logits_of(m1, V), *z2 = logits_of(m2, V);
    if (z1 && z2) {
        size_t bad = 0;
        for (int64_t i = 0; i < T * V; i++) bad += z1[i] != z0[i] || z2[i] != z1[i];
        CHECK(bad == 0, "%s %s: %zu logits differ between in-memory, mapped and copied", name, tn,
              bad);
    }
    /* written again from the mapped model: the same file */
    CHECK(ffn_gguf_save_model(m2, path, &so, NULL) == FFN_OK, "%s", ffn_last_error());
    CHECK(ffn_gguf_save_model(m1, path2, &so, NULL) == FFN_OK, "%s", ffn_last_error());
    CHECK(same_file(path, path2), "%s %s: the mapped model written again differs from the file",
          name, tn);
    if (type != FFN_GGML_TYPE_F32) { /* decoded to f32: the values the kernels use */
        so.type = FFN_GGML_TYPE_F32;
        ffn_model *m3 = NULL;
        CHECK(ffn_gguf_save_model(m1, path2, &so, NULL) == FFN_OK, "%s", ffn_last_error());
        CHECK(ffn_gguf_load_model(ctx, path2, &o, &m3, NULL) == FFN_OK, "%s", ffn_last_error());
        float *z3 = m3 ? logits_of(m3, V) : NULL;
        double worst = 0, top = 0;
        for (int64_t i = 0; z1 && z3 && i < T * V; i++) {
            double d = z3[i] > z1[i] ? z3[i] - z1[i] : z1[i] - z3[i];
            if (d > worst) worst = d;
            if ((z1[i] > 0 ? z1[i] : -z1[i]) > top) top = z1[i] > 0 ? z1[i] : -z1[i];
        }
        /* fp32 products of the decoded weights against the kernels' own
         * (activations quantized to 8 bits for the block types) */
        CHECK(z3 && worst <= 3e-2 * top, "%s %s: decoded f32 logits differ by %g (max |z| %g)",
              name, tn, worst, top);
        free(z3);
        ffn_model_free(m3);
    }
    free(z1);
    free(z2);
done:
    free(z0);
    ffn_model_free(m0);
    ffn_model_free(m1);
    ffn_model_free(m2);
    unlink(path);
    unlink(path2);
}

int main(void) {
    char dir[] = "/tmp/ffn_gguf_mmap_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    ffn_ctx *ctx = NULL;
    if (ffn_ctx_create(1, &ctx) != FFN_OK) return 1;
    static const ffn_ggml_type types[] = {FFN_GGML_TYPE_F32,  FFN_GGML_TYPE_F16,
                                          FFN_GGML_TYPE_BF16, FFN_GGML_TYPE_Q8_0,
                                          FFN_GGML_TYPE_Q4_0, FFN_GGML_TYPE_Q4_K,
                                          FFN_GGML_TYPE_Q6_K};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        run_case(ctx, "llama", cfg_llama, types[k], dir);
        run_case(ctx, "mixtral", cfg_mixtral, types[k], dir);
    }
    ffn_ctx_free(ctx);
    rmdir(dir);
    return check_done("test_gguf_mmap");
}
