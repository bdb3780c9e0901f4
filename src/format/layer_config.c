/* layer_config.c -- ffn_layer_config_load: a layer config from a JSON file
 * with Hugging Face names.
 *
 *   hidden_size        D, a positive integer (required)
 *   intermediate_size  F, a positive integer (required)
 *   hidden_act         default "silu"; Hugging Face names, or a GLU family
 *                      name (glu, bilinear, reglu, geglu, swiglu) which
 *                      implies a gated layer
 *   mlp_bias           default false
 *   mlp_type           "dense" | "gated" | "auto" (default: decided later
 *                      from the weights)
 *
 * A Mixture-of-Experts config (num_experts, num_local_experts or
 * n_routed_experts > 0) is refused with FFN_ERR_UNSUPPORTED: read as a single
 * FFN it would silently drop the experts.  `ffn layer` relies on that status
 * to hand such a config to the MoE path.
 *
 * Every error names the file, the field and the value found.  Nothing here
 * builds a layer; the sizes are checked so that the weights of the layer
 * (3·D·F floats, in bytes) fit in 64 bits. */
#include "ffn/layer.h"
#include "format/json.h"

#include <math.h>
#include <string.h>

static const char accepted_acts[] =
    "relu, gelu, gelu_pytorch_tanh, gelu_new, silu, swish, sigmoid, linear; for gated layers "
    "also glu, bilinear, reglu, geglu, swiglu";

/* A short description of what a JSON value is, for "found ..." messages. */
static void describe(const json_value *v, char *buf, size_t cap) {
    switch (v->type) {
    case JSON_NULL: snprintf(buf, cap, "null"); break;
    case JSON_FALSE: snprintf(buf, cap, "false"); break;
    case JSON_TRUE: snprintf(buf, cap, "true"); break;
    case JSON_NUMBER: snprintf(buf, cap, "%.17g", v->number); break;
    case JSON_STRING: snprintf(buf, cap, "the string \"%.60s\"", v->string); break;
    case JSON_ARRAY: snprintf(buf, cap, "an array"); break;
    case JSON_OBJECT: snprintf(buf, cap, "an object"); break;
    }
}

/* A required positive integer (a number with an integral value that fits
 * int64: 4096 and 4096.0 are accepted, 4096.5 and "4096" are not). */
static ffn_status get_size(const json_value *root, const char *key, const char *what,
                           const char *path, int64_t *out) {
    const json_value *v = json_get(root, key);
    char found[96];
    if (!v || v->type == JSON_NULL)
        return ffn_error(FFN_ERR_MISSING, "%s: %s: missing (%s, a positive integer)", path, key,
                         what);
    describe(v, found, sizeof found);
    int64_t n;
    if (v->type != JSON_NUMBER)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected a positive integer (%s), found %s",
                         path, key, what, found);
    if (v->is_integer) {
        n = v->integer;
    } else if (isfinite(v->number) && v->number == floor(v->number) &&
               fabs(v->number) < 9.2e18) {
        n = (int64_t)v->number;
    } else if (isfinite(v->number) && v->number == floor(v->number)) {
        return ffn_error(FFN_ERR_OVERFLOW, "%s: %s: %s does not fit in 64 bits", path, key,
                         found);
    } else {
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected a positive integer (%s), found %s",
                         path, key, what, found);
    }
    if (n <= 0)
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: must be a positive integer (%s), found %lld",
                         path, key, what, (long long)n);
    *out = n;
    return FFN_OK;
}

/* An optional string; NULL (absent or null) leaves *out unchanged. */
static ffn_status get_string(const json_value *root, const char *key, const char *path,
                             const char **out) {
    const json_value *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return FFN_OK;
    if (v->type != JSON_STRING) {
        char found[96];
        describe(v, found, sizeof found);
        return ffn_error(FFN_ERR_CONFIG, "%s: %s: expected a string, found %s", path, key, found);
    }
    *out = v->string;
    return FFN_OK;
}

/* The keys that make a config a Mixture of Experts; a positive value counts
 * (Hugging Face configs of dense models sometimes carry them as 0 or null). */
static ffn_status refuse_moe(const json_value *root, const char *path) {
    static const char *const keys[] = {"num_experts", "num_local_experts", "n_routed_experts"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_value *v = json_get(root, keys[i]);
        if (!v || v->type == JSON_NULL) continue;
        if (v->type == JSON_NUMBER && v->number == 0) continue;
        char found[96];
        describe(v, found, sizeof found);
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "%s: %s: %s -- a Mixture-of-Experts config, not a single FFN layer "
                         "(load it with the MoE API)",
                         path, keys[i], found);
    }
    /* num_experts_per_tok says MoE too, even beside "num_experts": 0, so that
     * the MoE loader reports what is wrong with the expert count. */
    const json_value *k = json_get(root, "num_experts_per_tok");
    if (k && k->type != JSON_NULL)
        return ffn_error(FFN_ERR_UNSUPPORTED,
                         "%s: num_experts_per_tok is set -- a Mixture-of-Experts config, not a "
                         "single FFN layer (load it with the MoE API)",
                         path);
    return FFN_OK;
}

ffn_status ffn_layer_config_load(const char *path, ffn_layer_config *cfg) {
    if (!path || !cfg)
        return ffn_error(FFN_ERR_INVALID_ARG, "ffn_layer_config_load: NULL %s",
                         path ? "cfg" : "path");
    json_doc *doc = NULL;
    ffn_status st = json_parse_file(path, &doc);
    if (st != FFN_OK) {
        /* The reader names the file in its messages; add it when it did not. */
        const char *msg = ffn_last_error();
        if (!msg || !strstr(msg, path)) ffn_error_prefix(st, "%s", path);
        return st;
    }
    const json_value *root = json_root(doc);
    ffn_layer_config c = {0};
    c.act = FFN_ACT_SILU;
    c.type = FFN_MLP_AUTO;
    c.save = FFN_SAVE_ACTIVATIONS;

    if (root->type != JSON_OBJECT) {
        char found[96];
        describe(root, found, sizeof found);
        st = ffn_error(FFN_ERR_CONFIG, "%s: expected a JSON object with hidden_size, "
                       "intermediate_size, hidden_act, found %s", path, found);
        goto done;
    }
    if ((st = refuse_moe(root, path)) != FFN_OK) goto done;

    /* ---- sizes: D and F, positive, and 3·D·F·4 bytes fit in int64 ---- */
    if ((st = get_size(root, "hidden_size", "the model width D", path, &c.hidden_size)) != FFN_OK)
        goto done;
    if ((st = get_size(root, "intermediate_size", "the FFN width F", path,
                       &c.intermediate_size)) != FFN_OK)
        goto done;
    int64_t elems, bytes;
    if (ffn_mul_i64(c.hidden_size, c.intermediate_size, &elems) || ffn_mul_i64(elems, 3, &elems) ||
        ffn_mul_i64(elems, (int64_t)sizeof(float), &bytes) || (uint64_t)bytes > SIZE_MAX) {
        st = ffn_error(FFN_ERR_OVERFLOW,
                       "%s: intermediate_size: %lld with hidden_size %lld overflows: the weights "
                       "(3 x D x F floats) need more than 2^63 bytes",
                       path, (long long)c.intermediate_size, (long long)c.hidden_size);
        goto done;
    }

    /* ---- activation (a GLU family name implies a gated layer) ---- */
    const char *act_name = "silu";
    if ((st = get_string(root, "hidden_act", path, &act_name)) != FFN_OK) goto done;
    ffn_mlp_type implied = FFN_MLP_AUTO;
    if (ffn_act_parse(act_name, &c.act, &implied) != FFN_OK) {
        st = ffn_error(FFN_ERR_CONFIG, "%s: hidden_act: unknown value '%s' (expected one of %s)",
                       path, act_name, accepted_acts);
        goto done;
    }

    /* ---- bias ---- */
    const json_value *bias = json_get(root, "mlp_bias");
    if (bias && bias->type != JSON_NULL) {
        if (bias->type != JSON_TRUE && bias->type != JSON_FALSE) {
            char found[96];
            describe(bias, found, sizeof found);
            st = ffn_error(FFN_ERR_CONFIG, "%s: mlp_bias: expected true or false, found %s", path,
                           found);
            goto done;
        }
        c.bias = bias->type == JSON_TRUE;
    }

    /* ---- type: explicit, implied by a family name, or left to the weights ---- */
    const char *type_name = NULL;
    if ((st = get_string(root, "mlp_type", path, &type_name)) != FFN_OK) goto done;
    if (type_name) {
        if (!strcmp(type_name, "dense")) c.type = FFN_MLP_DENSE;
        else if (!strcmp(type_name, "gated")) c.type = FFN_MLP_GATED;
        else if (!strcmp(type_name, "auto")) c.type = FFN_MLP_AUTO;
        else {
            st = ffn_error(FFN_ERR_CONFIG,
                           "%s: mlp_type: unknown value '%s' (expected \"dense\", \"gated\" or "
                           "\"auto\")",
                           path, type_name);
            goto done;
        }
    }
    if (implied == FFN_MLP_GATED) {
        if (c.type == FFN_MLP_DENSE) {
            st = ffn_error(FFN_ERR_CONFIG,
                           "%s: mlp_type: \"dense\" contradicts hidden_act '%s', a gated (GLU "
                           "family) name",
                           path, act_name);
            goto done;
        }
        c.type = FFN_MLP_GATED;
    }
    *cfg = c;
    st = FFN_OK;
done:
    json_free(doc);
    return st;
}
