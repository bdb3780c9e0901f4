/* test_trace.c -- causal tracing (include/ffn/trace.h) on a model built by
 * hand so that only one layer's FFN can carry anything (the other layers'
 * down_proj are zero):
 *   - the MLP trace puts every effect on that layer: the other layers'
 *     mlp_out effects are exactly 0, and that layer's are not;
 *   - positions before the subject have no effect of any kind (the noise
 *     cannot reach them); restoring the last layer's resid_post at the last
 *     position gives p_clean back exactly; restoring the embedding at every
 *     position recovers p_clean exactly (p_restore_input);
 *   - the same seed gives the same result bit for bit, another seed other
 *     noise; noise 0 gives p_corrupt = p_clean and no effect anywhere;
 *   - ffn_trace_prepare finds the subject's tokens and the target's first
 *     token (word and char vocabularies) and names what is wrong;
 *   - ffn_trace_summarize averages by position class. */
#include "check.h"

#include <ffn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 21, D = 16, F = 20, L = 3, CTX = 10, T = 6, CARRIER = 1 };

static ffn_ctx *ctx;

static ffn_model *make(void) {
    ffn_model_config c;
    ffn_model_config_default(&c);
    c.vocab_size = V;
    c.hidden_size = D;
    c.intermediate_size = F;
    c.num_hidden_layers = L;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 4;
    c.max_position_embeddings = CTX;
    ffn_model *m = NULL;
    ffn_status st = ffn_model_create(ctx, &c, NULL, &m);
    CHECK(st == FFN_OK, "create: %s", ffn_last_error());
    if (st) return NULL;
    ffn_model_init_weights(m, 5);
    int64_t n;
    float *p = ffn_model_params(m, &n);
    for (int64_t i = 0; i < n; i++) p[i] *= 12.0f;
    /* only layer CARRIER's FFN writes into the residual stream */
    for (int64_t l = 0; l < L; l++) {
        if (l == CARRIER) continue;
        char name[96];
        snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj.weight", (long long)l);
        const ffn_model_tensor *t = ffn_model_find_tensor(m, name);
        memset(p + t->offset, 0, (size_t)t->numel * sizeof *p);
    }
    ffn_model_params_changed(m);
    return m;
}

static const int32_t tokens[T] = {4, 9, 2, 7, 3, 11};
enum { SB = 1, SE = 3 };

static int32_t argmax_next(ffn_model *m) {
    float logits[T * V];
    ffn_model_logits(m, logits, tokens, 1, T);
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (logits[(T - 1) * V + v] > logits[(T - 1) * V + best]) best = v;
    return best;
}

static void test_carrier(void) {
    ffn_model *m = make();
    if (!m) return;
    const int32_t target = argmax_next(m);
    ffn_trace_options o;
    ffn_trace_options_default(&o);
    o.samples = 4;
    ffn_trace_result *r = NULL;
    CHECK(ffn_trace_run(ctx, m, tokens, T, SB, SE, target, &o, &r) == FFN_OK, "%s", ffn_last_error());
    if (!r) return;
    CHECK(r->p_corrupt < r->p_clean - 1e-3, "the noise changes nothing (clean %g, corrupt %g): the test proves nothing",
          r->p_clean, r->p_corrupt);
    CHECK(r->p_restore_input == r->p_clean, "restore input %.17g != clean %.17g", r->p_restore_input, r->p_clean);
    double carrier = 0;
    for (int64_t l = 0; l < L; l++)
        for (int64_t t = 0; t < T; t++) {
            const double e = r->effect[FFN_TRACE_MLP][l * T + t];
            if (l != CARRIER) CHECK(e == 0.0, "mlp_out effect at layer %lld pos %lld = %g (its FFN is zero)", (long long)l, (long long)t, e);
            else carrier = fmax(carrier, fabs(e));
            for (int k = 0; k < FFN_TRACE_N_KINDS; k++)
                if (t < SB)
                    CHECK(r->effect[k][l * T + t] == 0.0, "%s effect before the subject (l %lld t %lld) = %g",
                          ffn_trace_kind_name((ffn_trace_kind)k), (long long)l, (long long)t, r->effect[k][l * T + t]);
        }
    CHECK(carrier > 1e-3, "the carrier layer shows no MLP effect (max %g)", carrier);
    const double last = r->effect[FFN_TRACE_RESID][(L - 1) * T + T - 1];
    CHECK(fabs(last - (r->p_clean - r->p_corrupt)) < 1e-9, "last state restored: effect %g, expected %g", last,
          r->p_clean - r->p_corrupt);
    CHECK(r->noise_std > 0 && r->samples == 4 && r->subject_begin == SB && r->subject_end == SE, "fields");

    /* determinism and the seed */
    ffn_trace_result *r2 = NULL, *r3 = NULL;
    ffn_trace_run(ctx, m, tokens, T, SB, SE, target, &o, &r2);
    o.seed = 2;
    ffn_trace_run(ctx, m, tokens, T, SB, SE, target, &o, &r3);
    if (r2 && r3) {
        int same = r2->p_corrupt == r->p_corrupt, differs = r3->p_corrupt != r->p_corrupt;
        for (int k = 0; k < FFN_TRACE_N_KINDS; k++)
            same &= !memcmp(r->effect[k], r2->effect[k], (size_t)(L * T) * sizeof(double));
        CHECK(same, "the same seed gave another result");
        CHECK(differs, "another seed gave the same p_corrupt %g", r3->p_corrupt);
    }
    /* no noise: nothing to restore */
    o.noise = 0;
    ffn_trace_result *r0 = NULL;
    ffn_trace_run(ctx, m, tokens, T, SB, SE, target, &o, &r0);
    if (r0) {
        CHECK(r0->p_corrupt == r0->p_clean, "noise 0: corrupt %g clean %g", r0->p_corrupt, r0->p_clean);
        double worst = 0;
        for (int k = 0; k < FFN_TRACE_N_KINDS; k++)
            for (int64_t i = 0; i < L * T; i++) worst = fmax(worst, fabs(r0->effect[k][i]));
        CHECK(worst < 1e-6, "noise 0: an effect of %g", worst);
    }

    /* the summary of two results: layer CARRIER alone at the last subject token */
    const ffn_trace_result *both[2] = {r, r2};
    ffn_trace_summary s;
    CHECK(ffn_trace_summarize(both, 2, &s) == FFN_OK, "%s", ffn_last_error());
    CHECK(s.n_layers == L && s.n_results == 2, "summary sizes");
    CHECK(ffn_trace_position_class(r, 0) == 0 && ffn_trace_position_class(r, SB) == 1 &&
              ffn_trace_position_class(r, SE - 1) == 3 && ffn_trace_position_class(r, SE) == 4 &&
              ffn_trace_position_class(r, SE + 1) == 5 && ffn_trace_position_class(r, T - 1) == 6,
          "position classes");
    const double e_subj = r->effect[FFN_TRACE_MLP][CARRIER * T + SE - 1];
    CHECK(fabs(s.effect[FFN_TRACE_MLP][CARRIER * FFN_TRACE_N_CLASSES + 3] - e_subj) < 1e-12, "summary last subject %g vs %g",
          s.effect[FFN_TRACE_MLP][CARRIER * FFN_TRACE_N_CLASSES + 3], e_subj);
    /* further: the mean of positions SE+1 .. T-2 */
    double further = 0;
    for (int64_t t = SE + 1; t < T - 1; t++) further += r->effect[FFN_TRACE_ATTN][2 * T + t] / (double)(T - 2 - SE);
    CHECK(fabs(s.effect[FFN_TRACE_ATTN][2 * FFN_TRACE_N_CLASSES + 5] - further) < 1e-12, "summary further");
    CHECK(s.mlp_layer_share == (e_subj > 0 ? 1.0 : 0.0), "share %g (only layer %d can hold it; effect %g)",
          s.mlp_layer_share, CARRIER, e_subj);
    if (e_subj > 0) CHECK(s.mlp_peak_layer_subject == CARRIER, "peak layer %lld", (long long)s.mlp_peak_layer_subject);

    /* errors */
    ffn_trace_result *bad = NULL;
    CHECK(ffn_trace_run(ctx, m, tokens, T, 3, 3, target, &o, &bad) == FFN_ERR_INVALID_ARG, "empty subject span");
    CHECK(ffn_trace_run(ctx, m, tokens, T, 0, T + 1, target, &o, &bad) == FFN_ERR_INVALID_ARG, "span past T");
    CHECK(ffn_trace_run(ctx, m, tokens, T, 0, 1, V, &o, &bad) == FFN_ERR_INVALID_ARG, "target V");
    CHECK(bad == NULL, "a result after an error");
    ffn_trace_result_free(r), ffn_trace_result_free(r2), ffn_trace_result_free(r3), ffn_trace_result_free(r0);
    ffn_model_free(m);
}

static ffn_vocab *vocab_of(ffn_tokenizer_mode mode, const char *text) {
    ffn_tokenizer *tok = NULL;
    ffn_vocab *v = NULL;
    CHECK(ffn_tokenizer_build(mode, text, strlen(text), 0, &tok) == FFN_OK, "%s", ffn_last_error());
    CHECK(ffn_vocab_from_tokenizer(tok, &v) == FFN_OK, "%s", ffn_last_error());
    return v;
}

static void test_prepare(void) {
    const char *text = "As everyone knows, Mira lives in Velm.\nMira lives in Velm.\nThe home of Mira is Velm.\n";
    ffn_vocab *w = vocab_of(FFN_TOK_WORD, text);
    int32_t *ids = NULL, target = -2, *want = NULL;
    int64_t n = 0, b = -1, e = -1, nw = 0;
    CHECK(ffn_trace_prepare(w, "As everyone knows, Mira lives in", "Mira", "Velm", &ids, &n, &b, &e, &target) == FFN_OK,
          "%s", ffn_last_error());
    /* As, everyone, knows, ",", " Mira", " lives", " in" */
    CHECK(n == 7 && b == 4 && e == 5, "n %lld subject [%lld, %lld)", (long long)n, (long long)b, (long long)e);
    ffn_vocab_encode(w, " Velm", 5, 0, &want, &nw);
    CHECK(nw == 1 && target == want[0], "target %d, ' Velm' is %d", target, nw ? want[0] : -1);
    free(ids), free(want);
    CHECK(ffn_trace_prepare(w, "Mira lives in", "Mira", NULL, &ids, &n, &b, &e, &target) == FFN_OK, "%s", ffn_last_error());
    CHECK(b == 0 && e == 1 && target == -1, "sentence-initial subject [%lld, %lld), target %d", (long long)b, (long long)e, target);
    free(ids);
    ids = NULL;
    CHECK(ffn_trace_prepare(w, "Mira lives in", "Velm", NULL, &ids, &n, &b, &e, &target) == FFN_ERR_INVALID_ARG, "absent subject");
    CHECK(strstr(ffn_last_error(), "'Velm' does not occur in the prompt 'Mira lives in'") != NULL, "message: %s", ffn_last_error());
    CHECK(ids == NULL, "tokens after an error");
    CHECK(ffn_trace_prepare(w, "Mira lives in", "ira", NULL, &ids, &n, &b, &e, &target) == FFN_ERR_INVALID_ARG, "mid-token subject");
    CHECK(strstr(ffn_last_error(), "token boundaries") != NULL, "message: %s", ffn_last_error());
    CHECK(ffn_trace_prepare(w, "", "Mira", NULL, &ids, &n, &b, &e, &target) == FFN_ERR_INVALID_ARG, "empty prompt");
    ffn_vocab_free(w);

    /* a char vocabulary reads the space alone: the prompt takes it */
    ffn_vocab *c = vocab_of(FFN_TOK_CHAR, text);
    CHECK(ffn_trace_prepare(c, "Mira lives in", "Mira", "Velm", &ids, &n, &b, &e, &target) == FFN_OK, "%s", ffn_last_error());
    ffn_vocab_encode(c, "V", 1, 0, &want, &nw);
    CHECK(n == 14 && b == 0 && e == 4, "char: n %lld [%lld, %lld)", (long long)n, (long long)b, (long long)e);
    CHECK(nw == 1 && target == want[0], "char target %d, 'V' is %d", target, nw ? want[0] : -1);
    free(ids), free(want);
    ffn_vocab_free(c);
}

int main(void) {
    CHECK(ffn_ctx_create(1, &ctx) == FFN_OK, "ctx");
    test_carrier();
    test_prepare();
    ffn_ctx_free(ctx);
    return check_done("test_trace");
}
