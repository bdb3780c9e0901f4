/* cmd_layer.c -- `ffn layer`: run one FFN layer (dense or GLU family) on
 * tensors in safetensors files, forward and optionally backward, and write
 * the results to a safetensors file.  A config with experts is handed to
 * the MoE half (tools/layer_moe.h).  Only the public API is used.
 *
 * Letters: N tokens, D hidden_size, F intermediate_size.
 *
 * The contract (other tools and tests rely on it; see usage_text):
 *   in:   layer.json, w.safetensors (the layer's tensors), in.safetensors
 *         with x (N, D) and, for --backward, dy (N, D); F32, F16 or BF16
 *   out:  out.safetensors with y (N, D) and, for --backward, dx (N, D) and
 *         grad.<T> for every weight and bias tensor T; all F32.
 */
#include "cli.h"
#include "layer_moe.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The MoE half may be absent from a build: a weak reference links either
 * way and is NULL when nothing defines it. */
extern int layer_run_moe(const char *config_path, const char *weights_path,
                         const char *input_path, const char *output_path, int backward,
                         int threads, int precision) __attribute__((weak));

static const char about[] =
    "Run one feed-forward layer on the tensors of safetensors files and write the\n"
    "result (and, with --backward, every gradient) to a safetensors file.\n"
    "\n"
    "  dense:  y = down( act( up(x) ) )\n"
    "  gated:  y = down( act(gate(x)) * up(x) )      (GLU family, elementwise *)\n"
    "  where proj(x) = x . W^T + b  (W is [out, in], as in torch.nn.Linear)\n"
    "\n"
    "No files yet?  `ffn layer --make-example DIR` writes a small SwiGLU layer's\n"
    "DIR/layer.json, DIR/w.safetensors and DIR/in.safetensors to try it on.\n";

static const char synopsis[] =
    "--config layer.json --weights w.safetensors\n"
    "                 --input in.safetensors --output out.safetensors\n"
    "                 [--backward] [--threads N] [--recompute] [--precision P]\n"
    "       ffn layer --make-example DIR [--force]";

static const char epilog[] =
    "Inputs may be F32, F16 or BF16 (converted to fp32 on load); outputs are F32.\n"
    "Results are bitwise reproducible from run to run at a given thread count.\n"
    "Exit status: 0 ok, 1 failure (message on stderr), 2 bad usage.\n";

/* The six tensors of a layer: where each goes in ffn_layer_params, its
 * shape in letters, and when it is needed. */
typedef struct tensor_spec {
    const char *name;
    const char *grad_name;
    size_t field; /* offsetof(ffn_layer_params, ...) */
    char dims[3]; /* "FD", "DF", "F", "D" */
    int gate;     /* only for a gated layer */
    int bias;     /* only with mlp_bias */
} tensor_spec;

static const tensor_spec specs[] = {
    {"gate_proj.weight", "grad.gate_proj.weight", offsetof(ffn_layer_params, gate_w), "FD", 1, 0},
    {"gate_proj.bias", "grad.gate_proj.bias", offsetof(ffn_layer_params, gate_b), "F", 1, 1},
    {"up_proj.weight", "grad.up_proj.weight", offsetof(ffn_layer_params, up_w), "FD", 0, 0},
    {"up_proj.bias", "grad.up_proj.bias", offsetof(ffn_layer_params, up_b), "F", 0, 1},
    {"down_proj.weight", "grad.down_proj.weight", offsetof(ffn_layer_params, down_w), "DF", 0, 0},
    {"down_proj.bias", "grad.down_proj.bias", offsetof(ffn_layer_params, down_b), "D", 0, 1},
};
enum { NUM_SPECS = sizeof specs / sizeof specs[0] };

static float **param_slot(ffn_layer_params *p, const tensor_spec *s) {
    return (float **)((char *)p + s->field);
}

static int spec_needed(const tensor_spec *s, const ffn_layer_config *cfg) {
    return (!s->gate || cfg->type == FFN_MLP_GATED) && (!s->bias || cfg->bias);
}

static int spec_shape(const tensor_spec *s, const ffn_layer_config *cfg, int64_t *shape) {
    int nd = (int)strlen(s->dims);
    for (int i = 0; i < nd; i++)
        shape[i] = s->dims[i] == 'F' ? cfg->intermediate_size : cfg->hidden_size;
    return nd;
}

static void format_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static int same_shape(const ffn_st_tensor *t, int ndim, const int64_t *shape) {
    if (t->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

/* "expected [10, 6] ([F, D]), found [6, 10]" -- the shape message. */
static int shape_error(const char *file, const char *tensor, int ndim, const int64_t *shape,
                       const char *letters, const ffn_st_tensor *t) {
    char want[128], got[128];
    format_shape(want, sizeof want, ndim, shape);
    format_shape(got, sizeof got, t->ndim, t->shape);
    cli_error("layer", "%s: %s: expected shape %s (%s), found %s", file, tensor, want, letters,
              got);
    return CLI_EXIT_FAIL;
}

/* ---- the layer's tensors ---------------------------------------------- */

/* Decide dense or gated from the weights and the config (an explicit
 * mlp_type that disagrees with the weights is an error naming both). */
int layer_resolve_type(ffn_layer_config *cfg, const ffn_st_file *wf, const char *config_path,
                        const char *cmd) {
    int has_gate = ffn_st_has(wf, "gate_proj.weight");
    if (cfg->type == FFN_MLP_DENSE && has_gate) {
        cli_error(cmd, "%s: mlp_type is \"dense\" but %s has gate_proj.weight (a gated layer); "
                  "remove one or the other", config_path, ffn_st_path(wf));
        return CLI_EXIT_FAIL;
    }
    if (cfg->type == FFN_MLP_GATED && !has_gate) {
        cli_error(cmd, "%s: gate_proj.weight: missing, but %s makes the layer gated "
                  "(mlp_type \"gated\" or a GLU family hidden_act); expected gate_proj.weight [%lld, %lld]",
                  ffn_st_path(wf), config_path, (long long)cfg->intermediate_size,
                  (long long)cfg->hidden_size);
        return CLI_EXIT_FAIL;
    }
    cfg->type = has_gate ? FFN_MLP_GATED : FFN_MLP_DENSE;
    return 0;
}

/* Load every tensor the layer needs as fp32 (shape-checked) into *w. */
int layer_load_weights(const char *cmd, const ffn_st_file *wf, const ffn_layer_config *cfg,
                       ffn_layer_params *w) {
    memset(w, 0, sizeof *w);
    const char *file = ffn_st_path(wf);
    for (int i = 0; i < NUM_SPECS; i++) {
        const tensor_spec *s = &specs[i];
        if (!spec_needed(s, cfg)) {
            if (s->bias && !cfg->bias && ffn_st_has(wf, s->name))
                cli_error(cmd, "warning: %s: %s ignored (the config has mlp_bias false)", file,
                          s->name);
            continue;
        }
        int64_t shape[2];
        int nd = spec_shape(s, cfg, shape);
        ffn_st_tensor t;
        if (ffn_st_find(wf, s->name, &t) != FFN_OK) {
            char want[64];
            format_shape(want, sizeof want, nd, shape);
            cli_error(cmd, "%s: %s: missing (a %s layer%s needs %s %s)", file, s->name,
                      cfg->type == FFN_MLP_GATED ? "gated" : "dense",
                      s->bias ? " with mlp_bias" : "", s->name, want);
            return CLI_EXIT_FAIL;
        }
        if (!same_shape(&t, nd, shape))
            return shape_error(file, s->name, nd, shape,
                               !strcmp(s->dims, "FD")   ? "[F, D] = [intermediate_size, hidden_size]"
                               : !strcmp(s->dims, "DF") ? "[D, F] = [hidden_size, intermediate_size]"
                               : s->dims[0] == 'F'      ? "[F] = [intermediate_size]"
                                                        : "[D] = [hidden_size]",
                               &t);
        ffn_status st = ffn_st_load_f32(wf, s->name, nd, shape, param_slot(w, s));
        if (st != FFN_OK) return cli_fail(cmd, st);
    }
    return 0;
}

void layer_free_params(ffn_layer_params *p) {
    for (int i = 0; i < NUM_SPECS; i++) {
        free(*param_slot(p, &specs[i]));
        *param_slot(p, &specs[i]) = NULL;
    }
}

/* ---- the input file ----------------------------------------------------- */

/* Load `name` [N, D] (N taken from the file when *n < 0, else checked). */
static int load_rows(const char *cmd, const ffn_st_file *f, const char *name, const char *why,
                     int64_t D, int64_t *n, float **out) {
    ffn_st_tensor t;
    if (ffn_st_find(f, name, &t) != FFN_OK) {
        cli_error(cmd, "%s: %s: missing (%s, shape [N, %lld])", ffn_st_path(f), name, why,
                  (long long)D);
        return CLI_EXIT_FAIL;
    }
    if (t.ndim != 2 || t.shape[1] != D || (*n >= 0 && t.shape[0] != *n)) {
        char got[128];
        format_shape(got, sizeof got, t.ndim, t.shape);
        if (*n >= 0)
            cli_error(cmd, "%s: %s: expected shape [%lld, %lld] (the shape of x), found %s",
                      ffn_st_path(f), name, (long long)*n, (long long)D, got);
        else
            cli_error(cmd, "%s: %s: expected shape [N, %lld] (N tokens, D = hidden_size), found %s",
                      ffn_st_path(f), name, (long long)D, got);
        return CLI_EXIT_FAIL;
    }
    *n = t.shape[0];
    ffn_status st = ffn_st_load_f32(f, name, 2, t.shape, out);
    if (st != FFN_OK) return cli_fail(cmd, st);
    return 0;
}

/* calloc of count floats, never NULL for count 0, overflow-checked. */
static float *alloc_floats(int64_t a, int64_t b) {
    size_t count, bytes;
    if (a < 0 || b < 0 || __builtin_mul_overflow((size_t)a, (size_t)b, &count) ||
        __builtin_mul_overflow(count, sizeof(float), &bytes))
        return NULL;
    return calloc(bytes ? bytes / sizeof(float) : 1, sizeof(float));
}

/* ---- the run ---------------------------------------------------------- */

typedef struct layer_args {
    const char *config, *weights, *input, *output;
    int backward, recompute;
    int64_t threads;
    int precision;
} layer_args;

static int run(const layer_args *a) {
    const char *cmd = "layer";
    ffn_layer_config cfg;
    ffn_status st = ffn_layer_config_load(a->config, &cfg);
    if (st == FFN_ERR_UNSUPPORTED) { /* an MoE config (see layer_config.c) */
        if (!layer_run_moe) {
            cli_error(cmd, "%s: a Mixture-of-Experts config, but MoE is not built", a->config);
            return CLI_EXIT_FAIL;
        }
        if (a->recompute)
            cli_error(cmd, "warning: --recompute is not passed on to the MoE layer");
        return layer_run_moe(a->config, a->weights, a->input, a->output, a->backward,
                             (int)a->threads, a->precision);
    }
    if (st != FFN_OK) return cli_fail(cmd, st);
    cfg.save = a->recompute ? FFN_SAVE_NONE : FFN_SAVE_ACTIVATIONS;
    cfg.precision = (ffn_precision)a->precision;

    int rc = CLI_EXIT_FAIL;
    ffn_st_file *wf = NULL, *inf = NULL;
    ffn_ctx *ctx = NULL;
    ffn_layer *layer = NULL;
    ffn_layer_params w = {0}, g = {0};
    float *x = NULL, *dy = NULL, *y = NULL, *dx = NULL, *saved = NULL;
    void *ws = NULL;
    ffn_st_writer *wr = NULL;

    if ((st = ffn_st_open(a->weights, &wf)) != FFN_OK) { rc = cli_fail(cmd, st); goto done; }
    if ((rc = layer_resolve_type(&cfg, wf, a->config, cmd)) != 0) goto done;
    if ((rc = layer_load_weights(cmd, wf, &cfg, &w)) != 0) goto done;
    rc = CLI_EXIT_FAIL;

    const int64_t D = cfg.hidden_size;
    int64_t n = -1;
    if ((st = ffn_st_open(a->input, &inf)) != FFN_OK) { rc = cli_fail(cmd, st); goto done; }
    if (load_rows(cmd, inf, "x", "the layer input", D, &n, &x)) goto done;
    if (a->backward &&
        load_rows(cmd, inf, "dy", "--backward needs dy, the gradient of L with respect to y",
                  D, &n, &dy))
        goto done;

    if (cli_make_ctx(cmd, (int)a->threads, &ctx)) goto done;
    if ((st = ffn_layer_create(ctx, &cfg, &layer)) != FFN_OK ||
        (st = ffn_layer_set_weights(layer, &w)) != FFN_OK) {
        rc = cli_fail(cmd, st);
        goto done;
    }
    size_t ws_bytes = ffn_layer_workspace_size(layer, n);
    size_t saved_bytes = a->backward ? ffn_layer_saved_size(layer, n) : 0;
    ws = malloc(ws_bytes ? ws_bytes : 1);
    saved = saved_bytes ? malloc(saved_bytes) : NULL;
    y = alloc_floats(n, D);
    if (!ws || (saved_bytes && !saved) || !y) {
        cli_error(cmd, "out of memory for N = %lld tokens (workspace %zu bytes)", (long long)n,
                  ws_bytes);
        goto done;
    }

    /* forward, then backward of L = Σ y ⊙ dy into zeroed gradients */
    if ((st = ffn_layer_forward(layer, y, x, n, saved, ws, ws_bytes)) != FFN_OK) {
        rc = cli_fail(cmd, st);
        goto done;
    }
    if (a->backward) {
        dx = alloc_floats(n, D);
        int oom = !dx;
        for (int i = 0; i < NUM_SPECS && !oom; i++) {
            const tensor_spec *s = &specs[i];
            if (!spec_needed(s, &cfg)) continue;
            int64_t shape[2];
            int nd = spec_shape(s, &cfg, shape);
            float *p = alloc_floats(shape[0], nd == 2 ? shape[1] : 1);
            *param_slot(&g, s) = p;
            oom = !p;
        }
        if (oom) {
            cli_error(cmd, "out of memory for the gradients");
            goto done;
        }
        if ((st = ffn_layer_backward(layer, dx, &g, dy, x, n, saved, ws, ws_bytes)) != FFN_OK) {
            rc = cli_fail(cmd, st);
            goto done;
        }
    }

    /* write y, dx, grad.* (F32) */
    const int64_t rows_shape[2] = {n, D};
    if ((st = ffn_st_writer_create(&wr)) != FFN_OK) { rc = cli_fail(cmd, st); goto done; }
    st = ffn_st_writer_add(wr, "y", FFN_DTYPE_F32, 2, rows_shape, y);
    if (st == FFN_OK && a->backward) {
        st = ffn_st_writer_add(wr, "dx", FFN_DTYPE_F32, 2, rows_shape, dx);
        for (int i = 0; i < NUM_SPECS && st == FFN_OK; i++) {
            if (!spec_needed(&specs[i], &cfg)) continue;
            int64_t shape[2];
            int nd = spec_shape(&specs[i], &cfg, shape);
            st = ffn_st_writer_add(wr, specs[i].grad_name, FFN_DTYPE_F32, nd, shape,
                                   *param_slot(&g, &specs[i]));
        }
    }
    if (st == FFN_OK) st = ffn_st_writer_save(wr, a->output);
    if (st != FFN_OK) { rc = cli_fail(cmd, st); goto done; }
    printf("%s: y [%lld, %lld]%s (%s %s, D %lld, F %lld%s)\n", a->output, (long long)n,
           (long long)D, a->backward ? ", dx and the gradients" : "",
           cfg.type == FFN_MLP_GATED ? "gated" : "dense", ffn_act_name(cfg.act), (long long)D,
           (long long)cfg.intermediate_size, cfg.bias ? ", biases" : "");
    rc = 0;
done:
    ffn_st_writer_free(wr);
    ffn_layer_free(layer);
    ffn_ctx_free(ctx);
    layer_free_params(&w);
    layer_free_params(&g);
    free(x);
    free(dy);
    free(y);
    free(dx);
    free(saved);
    free(ws);
    ffn_st_close(inf);
    ffn_st_close(wf);
    return rc;
}

/* ---- --make-example: a layer to try the command on ------------------------ */

/* Letters as above; the example is a SwiGLU layer of Llama proportions
 * (F = 8D/3 rounded to a multiple of 4) and, for `ffn collapse`, a dense
 * linear layer of the same D and F. */
enum { EX_D = 64, EX_F = 172, EX_N = 8 };

static int write_text_file(const char *cmd, const char *path, const char *text) {
    ffn_atomic_file af;
    ffn_status st = ffn_atomic_open(&af, path);
    if (st != FFN_OK) return cli_fail(cmd, st);
    fputs(text, af.f);
    st = ffn_atomic_commit(&af);
    return st != FFN_OK ? cli_fail(cmd, st) : 0;
}

/* n normal numbers times scale, from r */
static void fill_normal(ffn_rng *r, float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * ffn_rng_normal(r));
}

static int write_tensors(const char *cmd, const char *path, int n, const char *const *names,
                         const int64_t (*shapes)[2], float *const *data) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    for (int i = 0; i < n && st == FFN_OK; i++)
        st = ffn_st_writer_add(w, names[i], FFN_DTYPE_F32, 2, shapes[i], data[i]);
    if (st == FFN_OK) st = ffn_st_writer_set_metadata(w, "ffn_example", "ffn layer --make-example");
    if (st == FFN_OK) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st != FFN_OK ? cli_fail(cmd, st) : 0;
}

static int layer_make_example(const char *cmd, const char *dir, int force) {
    static const char *const files[] = {"layer.json", "w.safetensors", "in.safetensors",
                                        "linear.json", "linear.safetensors"};
    enum { N_FILES = sizeof files / sizeof files[0] };
    char path[N_FILES][4096];
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (mkdir(dir, 0777) != 0) {
            cli_error(cmd, "%s: cannot create the directory: %s", dir, strerror(errno));
            return CLI_EXIT_FAIL;
        }
    } else if (!S_ISDIR(sb.st_mode)) {
        cli_error(cmd, "%s: exists and is not a directory", dir);
        return CLI_EXIT_FAIL;
    }
    for (int i = 0; i < N_FILES; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s", dir, files[i]);
        if (!force && lstat(path[i], &sb) == 0) {
            cli_error(cmd, "%s exists: --make-example keeps existing files (--force replaces "
                      "them)", path[i]);
            return CLI_EXIT_FAIL;
        }
    }
    const int64_t D = EX_D, F = EX_F, N = EX_N;
    float *buf = malloc((size_t)(3 * F * D + 2 * N * D + 2 * F * D) * sizeof(float));
    if (!buf) {
        cli_error(cmd, "out of memory");
        return CLI_EXIT_FAIL;
    }
    float *gate = buf, *up = gate + F * D, *down = up + F * D, *x = down + F * D, *dy = x + N * D;
    float *lin_up = dy + N * D, *lin_down = lin_up + F * D;
    ffn_rng r;
    ffn_rng_seed(&r, 1);
    /* weights ~ N(0, 1/fan_in): outputs of the size of the inputs */
    fill_normal(&r, gate, (size_t)(F * D), 1.0 / sqrt((double)D));
    fill_normal(&r, up, (size_t)(F * D), 1.0 / sqrt((double)D));
    fill_normal(&r, down, (size_t)(D * F), 1.0 / sqrt((double)F));
    fill_normal(&r, x, (size_t)(N * D), 1.0);
    fill_normal(&r, dy, (size_t)(N * D), 1.0);
    fill_normal(&r, lin_up, (size_t)(F * D), 1.0 / sqrt((double)D));
    fill_normal(&r, lin_down, (size_t)(D * F), 1.0 / sqrt((double)F));
    char cfg[256], lin[256];
    snprintf(cfg, sizeof cfg,
             "{\"hidden_size\": %d, \"intermediate_size\": %d, \"hidden_act\": \"silu\", "
             "\"mlp_bias\": false}\n", EX_D, EX_F);
    snprintf(lin, sizeof lin,
             "{\"hidden_size\": %d, \"intermediate_size\": %d, \"hidden_act\": \"linear\", "
             "\"mlp_bias\": false}\n", EX_D, EX_F);
    const int64_t fd[2] = {F, D}, df[2] = {D, F}, nd[2] = {N, D};
    const char *const wn[] = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"};
    const int64_t ws[3][2] = {{fd[0], fd[1]}, {fd[0], fd[1]}, {df[0], df[1]}};
    float *const wd[] = {gate, up, down};
    const char *const in_names[] = {"x", "dy"};
    const int64_t in_shapes[2][2] = {{nd[0], nd[1]}, {nd[0], nd[1]}};
    float *const in_data[] = {x, dy};
    const char *const ln[] = {"up_proj.weight", "down_proj.weight"};
    const int64_t ls[2][2] = {{fd[0], fd[1]}, {df[0], df[1]}};
    float *const ld[] = {lin_up, lin_down};
    int rc = write_text_file(cmd, path[0], cfg);
    if (!rc) rc = write_tensors(cmd, path[1], 3, wn, ws, wd);
    if (!rc) rc = write_tensors(cmd, path[2], 2, in_names, in_shapes, in_data);
    if (!rc) rc = write_text_file(cmd, path[3], lin);
    if (!rc) rc = write_tensors(cmd, path[4], 2, ln, ls, ld);
    free(buf);
    if (!rc)
        printf("%s: layer.json (SwiGLU, D %d, F %d), w.safetensors, in.safetensors (x and dy, "
               "%d tokens); linear.json and linear.safetensors (a dense linear layer, for ffn "
               "collapse)\n", dir, EX_D, EX_F, EX_N);
    return rc;
}

int cmd_layer(int argc, char **argv) {
    const char *cmd = "layer";
    layer_args a = {0};
    const char *example_dir = NULL;
    int force = 0;
    const cli_opt opts[] = {
        {.name = "--config", .type = CLI_PATH, .dst = &a.config, .metavar = "layer.json",
         .help = "Hugging Face names:\n"
                 "hidden_size (D), intermediate_size (F), hidden_act (default \"silu\"): relu, "
                 "gelu (exact, erf), gelu_pytorch_tanh | gelu_new (tanh approx.), silu | swish, "
                 "sigmoid, linear (identity); family names imply gated: glu (sigmoid), bilinear "
                 "(linear), reglu, geglu, swiglu\n"
                 "mlp_bias (default false): a bias on every projection\n"
                 "mlp_type \"dense\" | \"gated\" (default: gated when gate_proj.weight "
                 "exists)\n"
                 "A config with num_experts, num_local_experts or n_routed_experts runs the "
                 "Mixture-of-Experts layer instead (same files, see moe.h); without "
                 "norm_topk_prob, Mixtral (model_type mixtral, or num_local_experts and no "
                 "model_type) renormalises the top-k weights, others do not.  The routing "
                 "used is printed on stderr.  Expert tensors may use Mixtral's names "
                 "(experts.E.w1/w3/w2 = gate/up/down) and one common prefix (e.g. "
                 "block_sparse_moe.)."},
        {.name = "--weights", .type = CLI_PATH, .dst = &a.weights, .metavar = "w.safetensors",
         .help = "the layer's tensors (extra tensors are ignored):\n"
                 "gate_proj.weight [F, D], gate_proj.bias [F] (gated only)\n"
                 "up_proj.weight [F, D], up_proj.bias [F]\n"
                 "down_proj.weight [D, F], down_proj.bias [D] (biases with mlp_bias)"},
        {.name = "--input", .type = CLI_PATH, .dst = &a.input, .metavar = "in.safetensors",
         .help = "x [N, D], any N >= 0; with --backward also dy [N, D]"},
        {.name = "--output", .type = CLI_PATH, .dst = &a.output, .metavar = "out.safetensors",
         .help = "y [N, D]; with --backward also dx [N, D] and grad.<T> for every weight and "
                 "bias tensor T (e.g. grad.gate_proj.weight), the gradients of L = sum(y * dy).  "
                 "Written atomically (temporary file, then rename): a failed run never leaves a "
                 "partial file."},
        {.name = "--backward", .type = CLI_FLAG, .dst = &a.backward,
         .help = "also run backward (needs dy)"},
        {.name = "--recompute", .type = CLI_FLAG, .dst = &a.recompute,
         .help = "backward recomputes the input projections from x instead of keeping them "
                 "from forward: saves N*F floats (dense) or 2*N*F (gated) for about 1/3 more "
                 "backward work; results are bitwise identical"},
        CLI_OPT_THREADS(&a.threads),
        CLI_OPT_PRECISION(&a.precision),
        {.name = "--make-example", .type = CLI_PATH, .dst = &example_dir, .metavar = "DIR",
         .group = "a layer to try it on",
         .help = "write DIR/layer.json (a SwiGLU layer, D 64, F 172), DIR/w.safetensors (its "
                 "seeded random weights) and DIR/in.safetensors (x and dy, 8 tokens), each "
                 "atomically, then exit; existing files are kept unless --force"},
        CLI_OPT_FORCE(&force, "with --make-example: replace existing files"),
        {0}};
    const cli_spec spec = {.cmd = cmd, .synopsis = synopsis, .about = about, .epilog = epilog,
                           .opts = opts};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (example_dir) {
        if (a.config || a.weights || a.input || a.output)
            return cli_usage_error(cmd, "--make-example writes files; it takes no --config, "
                                   "--weights, --input or --output");
        return layer_make_example(cmd, example_dir, force);
    }
    const char *missing = !a.config ? "--config" : !a.weights ? "--weights"
                        : !a.input  ? "--input"  : !a.output  ? "--output" : NULL;
    if (missing) {
        cli_error(cmd, "missing %s (usage: ffn layer --config layer.json --weights "
                  "w.safetensors --input in.safetensors --output out.safetensors)", missing);
        return CLI_EXIT_USAGE;
    }
    return run(&a);
}
