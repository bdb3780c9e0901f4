/* test_public_tools_api.c -- the public pieces the tools use instead of
 * their own copies: the strict JSON reader (ffn/json.h), the PRNG
 * (ffn/rng.h) and the linear collapse (ffn/collapse.h).  Only ffn.h is
 * included: this is what a user of the installed library sees. */
#include "check.h"

#include <ffn.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_json(void) {
    const char *text = "{\"settings\": {\"steps\": 300, \"lr\": 3e-3}, \"variants\": "
                       "[{\"variant\": \"gelu\", \"val_loss_mean\": 0.8786, \"best\": null}, "
                       "{\"variant\": \"caf\\u00e9\"}], \"ok\": true}";
    ffn_json *doc = NULL;
    ffn_status st = ffn_json_parse(text, strlen(text), "t.json", &doc);
    CHECK(st == FFN_OK && doc, "parse: %s", ffn_last_error());
    const ffn_json_value *root = ffn_json_root(doc);
    CHECK(ffn_json_type_of(root) == FFN_JSON_OBJECT, "root is an object");
    CHECK(ffn_json_length(root) == 3, "3 members, got %zu", ffn_json_length(root));
    CHECK(!strcmp(ffn_json_key_at(root, 1), "variants"), "key 1: %s", ffn_json_key_at(root, 1));
    const ffn_json_value *set = ffn_json_get(root, "settings");
    int64_t steps = 0;
    CHECK(ffn_json_integer(ffn_json_get(set, "steps"), &steps) && steps == 300, "steps %lld",
          (long long)steps);
    CHECK(!ffn_json_integer(ffn_json_get(set, "lr"), NULL), "3e-3 is not an integer");
    CHECK(fabs(ffn_json_number(ffn_json_get(set, "lr")) - 3e-3) < 1e-15, "lr");
    const ffn_json_value *vs = ffn_json_get(root, "variants");
    CHECK(ffn_json_type_of(vs) == FFN_JSON_ARRAY && ffn_json_length(vs) == 2, "two variants");
    CHECK(!strcmp(ffn_json_string(ffn_json_get(ffn_json_at(vs, 0), "variant")), "gelu"), "gelu");
    CHECK(!strcmp(ffn_json_string(ffn_json_get(ffn_json_at(vs, 1), "variant")), "caf\xc3\xa9"),
          "the \\u escape decoded to UTF-8");
    CHECK(isnan(ffn_json_number(ffn_json_get(ffn_json_at(vs, 0), "best"))), "null is no number");
    CHECK(ffn_json_type_of(ffn_json_get(ffn_json_at(vs, 0), "best")) == FFN_JSON_NULL, "null");
    CHECK(ffn_json_type_of(ffn_json_get(root, "ok")) == FFN_JSON_TRUE, "true");
    /* absent and wrong-typed lookups chain to "absent" */
    CHECK(ffn_json_get(root, "nope") == NULL, "absent key");
    CHECK(ffn_json_at(vs, 2) == NULL && ffn_json_at(set, 9) == NULL, "out of range");
    CHECK(ffn_json_string(ffn_json_get(ffn_json_get(root, "nope"), "x")) == NULL, "chain on NULL");
    CHECK(ffn_json_length(ffn_json_get(set, "steps")) == 0, "a number has no length");
    CHECK(ffn_json_key_at(vs, 0) == NULL, "an array has no keys");
    ffn_json_free(doc);
    ffn_json_free(NULL);

    /* strict: what the report's old reader accepted is refused, with the offset */
    const char *bad[] = {"{\"loss\": nan}", "{\"a\": 1,}", "[1 2]", "{\"a\": 1, \"a\": 2}", "{"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        doc = NULL;
        st = ffn_json_parse(bad[i], strlen(bad[i]), "bad.json", &doc);
        CHECK(st == FFN_ERR_FORMAT && !doc, "'%s' refused (status %d)", bad[i], st);
        CHECK(strstr(ffn_last_error(), "bad.json") != NULL, "message names the input: %s",
              ffn_last_error());
    }
    st = ffn_json_parse_file("/nonexistent/compare.json", &doc);
    CHECK(st != FFN_OK && strstr(ffn_last_error(), "/nonexistent/compare.json"),
          "a missing file is named: %s", ffn_last_error());
}

static void test_rng(void) {
    ffn_rng a, b;
    ffn_rng_seed(&a, 42);
    ffn_rng_seed(&b, 42);
    int same = 1;
    for (int i = 0; i < 100; i++) same &= ffn_rng_next(&a) == ffn_rng_next(&b);
    CHECK(same, "the same seed gives the same stream");
    ffn_rng_seed(&b, 43);
    CHECK(ffn_rng_next(&a) != ffn_rng_next(&b), "another seed, another stream");
    /* splitmix64's published first output for seed 0 */
    uint64_t s = 0;
    CHECK(ffn_splitmix64(&s) == 0xe220a8397b1dcdafull, "splitmix64(0)");
    /* normal draws: mean ~0, variance ~1 over 200000 (tolerances are 5 standard errors) */
    ffn_rng_seed(&a, 7);
    const int n = 200000;
    double sum = 0, sq = 0;
    int finite = 1;
    for (int i = 0; i < n; i++) {
        double z = ffn_rng_normal(&a);
        finite &= isfinite(z);
        sum += z;
        sq += z * z;
    }
    double mean = sum / n, var = sq / n - mean * mean;
    CHECK(finite, "every normal draw is finite");
    CHECK(fabs(mean) < 5.0 / sqrt(n), "mean %g", mean);
    CHECK(fabs(var - 1) < 5.0 * sqrt(2.0 / n), "variance %g", var);
    for (int i = 0; i < 1000; i++) {
        uint64_t k = ffn_rng_below(&a, 7);
        float u = ffn_rng_float(&a);
        if (k >= 7 || u < 0 || u >= 1) {
            CHECK(0, "below/float out of range: %llu %g", (unsigned long long)k, u);
            break;
        }
    }
}

/* W = W_down·W_up and b = W_down·b_up + b_down against a naive double loop,
 * odd sizes; the check against the layer; refusals. */
static void test_collapse(void) {
    const int64_t D = 7, F = 13;
    float up[13 * 7], down[7 * 13], bu[13], bd[7], w[49], b[7];
    ffn_rng r;
    ffn_rng_seed(&r, 3);
    for (int i = 0; i < F * D; i++) up[i] = (float)ffn_rng_normal(&r);
    for (int i = 0; i < D * F; i++) down[i] = (float)ffn_rng_normal(&r);
    for (int i = 0; i < F; i++) bu[i] = (float)ffn_rng_normal(&r);
    for (int i = 0; i < D; i++) bd[i] = (float)ffn_rng_normal(&r);
    ffn_layer_config cfg = {.hidden_size = D, .intermediate_size = F, .type = FFN_MLP_DENSE,
                            .act = FFN_ACT_LINEAR, .bias = 1};
    ffn_layer_params p = {.up_w = up, .up_b = bu, .down_w = down, .down_b = bd};
    ffn_status st = ffn_collapse_merge(&cfg, &p, w, b);
    CHECK(st == FFN_OK, "merge: %s", ffn_last_error());
    double worst = 0;
    for (int64_t i = 0; i < D; i++) {
        for (int64_t j = 0; j < D; j++) {
            double s = 0;
            for (int64_t k = 0; k < F; k++) s += (double)down[i * F + k] * up[k * D + j];
            worst = fmax(worst, fabs(s - w[i * D + j]) / fmax(1, fabs(s)));
        }
        double s = bd[i];
        for (int64_t k = 0; k < F; k++) s += (double)down[i * F + k] * bu[k];
        worst = fmax(worst, fabs(s - b[i]) / fmax(1, fabs(s)));
    }
    CHECK(worst < 1e-6, "merged W, b against the double loop: relative %g (tolerance 1e-6)", worst);

    ffn_ctx *ctx = NULL;
    CHECK(ffn_ctx_create(1, &ctx) == FFN_OK, "ctx");
    ffn_collapse_result res;
    st = ffn_collapse_check(ctx, &cfg, &p, w, b, 33, 1, &res);
    CHECK(st == FFN_OK, "check: %s", ffn_last_error());
    CHECK(res.max_abs_y > 0.1 && res.max_rel_diff < 1e-5, "the layer equals W x + b: rel %g of %g",
          res.max_rel_diff, res.max_abs_y);
    CHECK(res.params_before == 2 * D * F + F + D && res.params_after == D * D + D, "params %lld -> %lld",
          (long long)res.params_before, (long long)res.params_after);
    ffn_collapse_result res2;
    ffn_collapse_check(ctx, &cfg, &p, w, b, 33, 1, &res2);
    CHECK(res2.max_abs_diff == res.max_abs_diff, "seeded: the same numbers twice");
    /* a wrong W is caught */
    w[3] += 0.5f;
    ffn_collapse_check(ctx, &cfg, &p, w, b, 33, 1, &res2);
    CHECK(res2.max_abs_diff > 0.1, "a perturbed W shows: %g", res2.max_abs_diff);

    cfg.act = FFN_ACT_RELU;
    st = ffn_collapse_merge(&cfg, &p, w, b);
    CHECK(st == FFN_ERR_UNSUPPORTED && strstr(ffn_last_error(), "relu"), "relu refused: %s",
          ffn_last_error());
    cfg.act = FFN_ACT_LINEAR;
    cfg.type = FFN_MLP_GATED;
    st = ffn_collapse_check(ctx, &cfg, &p, w, b, 4, 1, &res2);
    CHECK(st == FFN_ERR_UNSUPPORTED && strstr(ffn_last_error(), "gated"), "gated refused: %s",
          ffn_last_error());
    ffn_ctx_free(ctx);
}

int main(void) {
    test_json();
    test_rng();
    test_collapse();
    return check_done("test_public_tools_api");
}
