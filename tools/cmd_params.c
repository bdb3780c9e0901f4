/* cmd_params.c -- `ffn params`: where the parameters and the FLOPs of a
 * model go, from its Hugging Face config.json; and `ffn params
 * --suggest-intermediate`: the LLaMA FFN sizing rule and the Shazeer 2/3
 * rule.  The counting lives in the library (ffn_params_from_config); this
 * file prints. */
#include "cli.h"
#include "ffn/checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define CMD "params"

static const char *conventions[] = {
    "every tensor is counted once: norm weights and biases and all biases are counted; a tied "
    "input/output embedding is counted once (as the token embedding)",
    "embeddings (token, position, token type) are counted in the totals",
    "active = parameters used per token: everything except the routed experts, plus K of the E "
    "routed experts of each MoE layer (embeddings, head, norms, attention, router and shared "
    "experts included); active == total for dense models",
    "FLOPs are per token, 2 per multiply-add of a matrix product (LM head included, tied or "
    "not); embedding lookups, norms, biases, activations, softmax and top-k are not counted",
    "attention scores at context T: QK^T = 2*H*d_qk*T and AV = 2*H*d_v*T per layer (a token "
    "attending to T keys; a causal average over a T-token window is about half)",
    "training FLOPs per token = 6*N_active + 3*(QK^T + AV): forward 2N, backward 4N, and the "
    "attention-score terms tripled likewise; 'matmul only' is 3 x the forward count",
    "bert is BertModel with its pooler (counted as the head; it runs once per sequence, so no "
    "FLOPs per token); deepseek_v3's MTP module is reported apart and not in the totals, its "
    "e_score_correction_bias is counted (router)",
};
#define N_CONVENTIONS (sizeof conventions / sizeof conventions[0])

/* "  - text" wrapped at 79 columns, continuation lines indented by 4. */
static void print_wrapped(FILE *f, const char *text) {
    const int width = 79;
    int col = fprintf(f, "  -");
    while (*text) {
        size_t word = strcspn(text, " ");
        if (col + 1 + (int)word > width && col > 4) col = fprintf(f, "\n   ");
        col += fprintf(f, " %.*s", (int)word, text);
        text += word;
        while (*text == ' ') text++;
    }
    fputc('\n', f);
}

static const char about[] =
    "Parameter and FLOP accounting from a Hugging Face config.json, for model_type\n"
    "llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, gemma, gemma2, gemma3_text\n"
    "(gemma3: the text model of its text_config), phi3, olmoe, gpt2, starcoder2,\n"
    "bert, deepseek_v2 and deepseek_v3, or a GGUF file of these.  Prints the total\n"
    "and the active parameters per token, the breakdown into attention, FFN (dense,\n"
    "routed experts, shared experts, router), embeddings, head and norms with\n"
    "percentages, the FFN's share, the expansion ratio intermediate_size /\n"
    "hidden_size, forward and training FLOPs per token by component, and memory\n"
    "estimates: weight bytes per storage type, the KV cache at --seq-len, and\n"
    "tokens/s <= --bandwidth / bytes read per token.\n"
    "How things are counted: --conventions (below).\n"
    "\n"
    "--suggest-intermediate applies the LLaMA sizing rule (Meta's model.py):\n"
    "  F = int(2*4*D/3); F = int(X*F) with --ffn-dim-multiplier X; F rounded up to a\n"
    "  multiple of --multiple-of.\n"
    "  4096/256 -> 11008 (Llama-2-7B); 4096/1024 with 1.3 -> 14336 (Llama-3-8B).\n"
    "and shows Shazeer's 2/3 rule: a gated FFN (gate, up, down: 3*D*F weights) with\n"
    "F = 2/3*4D has the parameters of a dense FFN (up, down: 2*D*F) with F = 4D.\n";

static const char synopsis[] =
    "CONFIG.json [--seq-len T] [--bandwidth GB/s] [--per-layer]\n"
    "                  [--json]\n"
    "       ffn params --suggest-intermediate --hidden D [--multiple-of M]\n"
    "                  [--ffn-dim-multiplier X] [--json]\n"
    "       ffn params --conventions";

static void print_conventions(FILE *f) {
    fprintf(f, "conventions:\n");
    for (size_t i = 0; i < N_CONVENTIONS; i++) print_wrapped(f, conventions[i]);
}

/* 1234567 -> "1,234,567" */
static const char *grouped(int64_t v, char *buf, size_t n) {
    char raw[32];
    snprintf(raw, sizeof raw, "%" PRId64, v < 0 ? -v : v);
    size_t len = strlen(raw), o = 0;
    if (v < 0 && o + 1 < n) buf[o++] = '-';
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

/* 6738415616 -> "6.74B" */
static const char *human(double v, char *buf, size_t n) {
    const char *unit[] = {"", "K", "M", "B", "T", "P", "E"};
    int u = 0;
    while (fabs(v) >= 1000 && u < 6) v /= 1000, u++;
    snprintf(buf, n, u ? "%.2f%s" : "%.0f%s", v, unit[u]);
    return buf;
}

static double pct(int64_t part, int64_t whole) {
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* ---- the readable report ------------------------------------------------ */

static void print_param_row(const char *name, int64_t total, int64_t all, int64_t active,
                            int64_t all_active, int moe) {
    char a[32], b[32];
    printf("  %-26s %20s %7.2f%%", name, grouped(total, a, sizeof a), pct(total, all));
    if (moe) printf("  %20s %7.2f%%", grouped(active, b, sizeof b), pct(active, all_active));
    printf("\n");
}

static void print_report(const char *path, const ffn_params_report *r, int per_layer) {
    char a[32], b[32], c[32];
    int moe = r->n_moe_layers > 0;
    printf("ffn params: %s\n", path);
    printf("model_type %s: D %" PRId64 ", L %" PRId64 ", V %" PRId64 ", %s with %" PRId64
           " heads (%" PRId64 " kv, head dim qk %" PRId64 " v %" PRId64 ")\n",
           r->model_type, r->hidden_size, r->n_layers, r->vocab_size, r->attention_kind,
           r->n_heads, r->n_kv_heads, r->head_dim_qk, r->head_dim_v);
    printf("FFN %s", r->ffn_kind);
    if (r->intermediate_size) printf(", dense F %" PRId64, r->intermediate_size);
    if (moe)
        printf(", %" PRId64 " of %" PRId64 " layers MoE: E %" PRId64 " experts of F %" PRId64
               ", top-%" PRId64,
               r->n_moe_layers, r->n_layers, r->n_experts, r->moe_intermediate_size, r->top_k);
    if (moe && r->shared_intermediate_size)
        printf(", shared experts of total width %" PRId64, r->shared_intermediate_size);
    printf("; %s\n\n", !strcmp(r->model_type, "bert") ? "no LM head (the pooler is the head)"
                        : r->tied_embeddings ? "embeddings tied (counted once)"
                                             : "embeddings untied");

    const ffn_param_counts *p = &r->params, *q = &r->active;
    printf("  %-26s %20s %8s", "parameters", "total", "share");
    if (moe) printf("  %20s %8s", "active per token", "share");
    printf("\n");
    struct { const char *name; int64_t t, a; } rows[] = {
        {"attention", p->attention, q->attention},
        {"FFN dense", p->ffn_dense, q->ffn_dense},
        {"FFN routed experts", p->ffn_routed, q->ffn_routed},
        {"FFN shared experts", p->ffn_shared, q->ffn_shared},
        {"FFN router", p->router, q->router},
        {"norms", p->norms, q->norms},
        {"embedding: token", p->embed_token, q->embed_token},
        {"embedding: position", p->embed_position, q->embed_position},
        {"embedding: token type", p->embed_token_type, q->embed_token_type},
        {!strcmp(r->model_type, "bert") ? "head (pooler)" : "head (untied LM head)", p->head,
         q->head},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].t) print_param_row(rows[i].name, rows[i].t, p->total, rows[i].a, q->total, moe);
    print_param_row("total", p->total, p->total, q->total, q->total, moe);
    printf("\n");
    printf("total parameters              %s (%s)\n", grouped(p->total, a, sizeof a),
           human((double)p->total, b, sizeof b));
    printf("active parameters per token   %s (%s)%s\n", grouped(q->total, a, sizeof a),
           human((double)q->total, b, sizeof b), moe ? "" : "  (dense: all)");
    if (moe)
        printf("active without embedding lookups %s (%s)  (the convention of DeepSeek's "
               "'activated' figures)\n",
               grouped(r->active_excl_embeddings, a, sizeof a),
               human((double)r->active_excl_embeddings, b, sizeof b));
    if (r->mtp_params)
        printf("MTP module (not in the totals) %s (%s)\n", grouped(r->mtp_params, a, sizeof a),
               human((double)r->mtp_params, b, sizeof b));
    printf("FFN share (dense + experts + shared + router) %.2f%% of total", 100 * r->ffn_share);
    if (moe) printf(", %.2f%% of active", 100 * r->ffn_share_active);
    printf("\n");
    if (r->intermediate_size)
        printf("expansion ratio intermediate_size/hidden_size = %" PRId64 "/%" PRId64 " = %.4g\n",
               r->intermediate_size, r->hidden_size, r->expansion_ratio);
    if (moe)
        printf("expert expansion ratio moe_intermediate_size/hidden_size = %" PRId64 "/%" PRId64
               " = %.4g\n",
               r->moe_intermediate_size, r->hidden_size, r->moe_expansion_ratio);

    const ffn_flop_counts *f = &r->forward;
    printf("\nforward FLOPs per token at seq_len T = %" PRId64 "\n", r->seq_len);
    struct { const char *name; int64_t v; } frows[] = {
        {"attention projections", f->attention_proj},
        {"attention QK^T (T keys)", f->attention_qk},
        {"attention AV (T values)", f->attention_av},
        {"FFN dense", f->ffn_dense},
        {"FFN routed experts (K)", f->ffn_routed},
        {"FFN shared experts", f->ffn_shared},
        {"FFN router", f->router},
        {"LM head", f->head},
    };
    for (size_t i = 0; i < sizeof frows / sizeof frows[0]; i++)
        if (frows[i].v)
            printf("  %-26s %20s %7.2f%%  (%s)\n", frows[i].name, grouped(frows[i].v, a, sizeof a),
                   pct(frows[i].v, f->total), human((double)frows[i].v, b, sizeof b));
    printf("  %-26s %20s %7.2f%%  (%s)\n", "total", grouped(f->total, a, sizeof a), 100.0,
           human((double)f->total, b, sizeof b));
    printf("training FLOPs per token = 6*N_active + 3*(QK^T + AV) = %s (%s)\n",
           grouped(r->training_flops, a, sizeof a), human((double)r->training_flops, b, sizeof b));
    printf("  (matmul only, 3 x forward = %s (%s))\n",
           grouped(r->training_flops_matmul, c, sizeof c),
           human((double)r->training_flops_matmul, b, sizeof b));

    if (per_layer) {
        printf("\nper layer (parameters; FLOPs forward per token at T = %" PRId64 ")\n",
               r->seq_len);
        printf("  %5s %-5s %14s %14s %16s %14s %12s %10s %16s %14s %16s\n", "layer", "ffn",
               "attention", "FFN dense", "routed experts", "shared", "router", "norms", "total",
               "active", "FLOPs");
        for (int64_t i = 0; i < r->n_layers; i++) {
            const ffn_params_layer *l = &r->layers[i];
            char s[9][32];
            printf("  %5" PRId64 " %-5s %14s %14s %16s %14s %12s %10s %16s %14s %16s\n", i,
                   l->is_moe ? "moe" : "dense",
                   grouped(l->params.attention, s[0], 32), grouped(l->params.ffn_dense, s[1], 32),
                   grouped(l->params.ffn_routed, s[2], 32), grouped(l->params.ffn_shared, s[3], 32),
                   grouped(l->params.router, s[4], 32), grouped(l->params.norms, s[5], 32),
                   grouped(l->params.total, s[6], 32), grouped(l->active.total, s[7], 32),
                   grouped(l->flops.total, s[8], 32));
        }
    }

    printf("\nmemory (estimates; KV cache f16, %.4g GB/s memory bandwidth)\n", r->bandwidth_gbs);
    printf("  KV cache per token %s bytes (f32 as ffn keeps it: %s); at T = %" PRId64 ": %s bytes\n",
           grouped(r->kv_bytes_per_token_f16, a, sizeof a),
           grouped(r->kv_bytes_per_token_f32, b, sizeof b), r->seq_len,
           grouped(r->kv_bytes_f16, c, sizeof c));
    printf("  %-6s %8s %20s %22s %14s\n", "format", "bits/w", "weight bytes", "read per token",
           "decode tok/s");
    for (int i = 0; i < r->n_formats; i++) {
        const ffn_params_memory *m = &r->memory[i];
        printf("  %-6s %8.4g %20s %22s %14.3g\n", m->format, m->bits_per_weight,
               grouped(m->weight_bytes, a, sizeof a), grouped(m->read_bytes_per_token, b, sizeof b),
               m->decode_tokens_per_s);
    }

    printf("\nconventions: how things are counted, see ffn params --conventions\n");
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_params(const ffn_param_counts *p) {
    printf("{\"attention\": %" PRId64 ", \"ffn_dense\": %" PRId64 ", \"ffn_routed\": %" PRId64
           ", \"ffn_shared\": %" PRId64 ", \"router\": %" PRId64 ", \"norms\": %" PRId64
           ", \"embed_token\": %" PRId64 ", \"embed_position\": %" PRId64
           ", \"embed_token_type\": %" PRId64 ", \"head\": %" PRId64 ", \"total\": %" PRId64 "}",
           p->attention, p->ffn_dense, p->ffn_routed, p->ffn_shared, p->router, p->norms,
           p->embed_token, p->embed_position, p->embed_token_type, p->head, p->total);
}

static void json_flops(const ffn_flop_counts *f) {
    printf("{\"attention_proj\": %" PRId64 ", \"attention_qk\": %" PRId64
           ", \"attention_av\": %" PRId64 ", \"ffn_dense\": %" PRId64 ", \"ffn_routed\": %" PRId64
           ", \"ffn_shared\": %" PRId64 ", \"router\": %" PRId64 ", \"head\": %" PRId64
           ", \"total\": %" PRId64 "}",
           f->attention_proj, f->attention_qk, f->attention_av, f->ffn_dense, f->ffn_routed,
           f->ffn_shared, f->router, f->head, f->total);
}

/* A JSON string literal of plain ASCII text (our own messages). */
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

static void print_json(const char *path, const ffn_params_report *r) {
    printf("{\"config\": ");
    json_str(path);
    printf(", \"model_type\": ");
    json_str(r->model_type);
    printf(", \"total_params\": %" PRId64 ", \"active_params\": %" PRId64
           ", \"active_params_excl_embeddings\": %" PRId64 ", \"mtp_params\": %" PRId64,
           r->params.total, r->active.total, r->active_excl_embeddings, r->mtp_params);
    printf(",\n \"hidden_size\": %" PRId64 ", \"num_layers\": %" PRId64 ", \"num_moe_layers\": %" PRId64
           ", \"vocab_size\": %" PRId64 ", \"num_heads\": %" PRId64 ", \"num_kv_heads\": %" PRId64
           ", \"head_dim_qk\": %" PRId64 ", \"head_dim_v\": %" PRId64
           ", \"intermediate_size\": %" PRId64 ", \"moe_intermediate_size\": %" PRId64
           ", \"shared_intermediate_size\": %" PRId64 ", \"num_experts\": %" PRId64
           ", \"top_k\": %" PRId64 ", \"tied_embeddings\": %s, \"attention_kind\": ",
           r->hidden_size, r->n_layers, r->n_moe_layers, r->vocab_size, r->n_heads, r->n_kv_heads,
           r->head_dim_qk, r->head_dim_v, r->intermediate_size, r->moe_intermediate_size,
           r->shared_intermediate_size, r->n_experts, r->top_k,
           r->tied_embeddings ? "true" : "false");
    json_str(r->attention_kind);
    printf(", \"ffn_kind\": ");
    json_str(r->ffn_kind);
    printf(",\n \"params\": ");
    json_params(&r->params);
    printf(",\n \"active\": ");
    json_params(&r->active);
    printf(",\n \"ffn_share\": %s, \"ffn_share_active\": %s, \"expansion_ratio\": %s"
           ", \"moe_expansion_ratio\": %s",
           cli_json_num(r->ffn_share, "%.17g"), cli_json_num(r->ffn_share_active, "%.17g"),
           cli_json_num(r->expansion_ratio, "%.17g"),
           cli_json_num(r->moe_expansion_ratio, "%.17g"));
    printf(",\n \"seq_len\": %" PRId64 ", \"forward_flops_per_token\": ", r->seq_len);
    json_flops(&r->forward);
    printf(",\n \"training_flops_per_token\": %" PRId64
           ", \"training_flops_per_token_matmul\": %" PRId64,
           r->training_flops, r->training_flops_matmul);
    printf(",\n \"memory\": {\"estimate\": true, \"bandwidth_gbs\": %s, \"kv_elements_per_token\": "
           "%" PRId64 ", \"kv_bytes_per_token_f16\": %" PRId64
           ", \"kv_bytes_per_token_f32\": %" PRId64 ", \"kv_bytes_f16_at_seq_len\": %" PRId64
           ", \"formats\": [",
           cli_json_num(r->bandwidth_gbs, "%.17g"), r->kv_elements_per_token,
           r->kv_bytes_per_token_f16, r->kv_bytes_per_token_f32, r->kv_bytes_f16);
    for (int i = 0; i < r->n_formats; i++) {
        const ffn_params_memory *m = &r->memory[i];
        printf("%s{\"format\": \"%s\", \"bits_per_weight\": %s, \"weight_bytes\": %" PRId64
               ", \"read_bytes_per_token\": %" PRId64 ", \"decode_tokens_per_s\": %s}",
               i ? ", " : "", m->format, cli_json_num(m->bits_per_weight, "%.17g"), m->weight_bytes,
               m->read_bytes_per_token, cli_json_num(m->decode_tokens_per_s, "%.17g"));
    }
    printf("]}");
    printf(",\n \"conventions\": [");
    for (size_t i = 0; i < N_CONVENTIONS; i++) {
        if (i) printf(", ");
        json_str(conventions[i]);
    }
    printf("],\n \"layers\": [");
    for (int64_t i = 0; i < r->n_layers; i++) {
        const ffn_params_layer *l = &r->layers[i];
        printf("%s\n  {\"layer\": %" PRId64 ", \"moe\": %s, \"params\": ", i ? "," : "", i,
               l->is_moe ? "true" : "false");
        json_params(&l->params);
        printf(", \"active\": ");
        json_params(&l->active);
        printf(", \"forward_flops_per_token\": ");
        json_flops(&l->flops);
        printf("}");
    }
    printf("]}\n");
}

/* ---- --suggest-intermediate ------------------------------------------------ */

static int suggest(int64_t d, int64_t multiple_of, double mult, int json) {
    int64_t f = 0;
    ffn_status st = ffn_params_llama_intermediate(d, multiple_of, mult, &f);
    if (st != FFN_OK) return cli_fail(CMD, st);
    /* Shazeer: dense 2·D·(4D) = 8D² = gated 3·D·(8D/3), exact in real numbers */
    int64_t two_thirds = 8 * d / 3, dense = 0, gated_exact = 0, gated_floor = 0, gated_rule = 0;
    if (__builtin_mul_overflow(d, 8 * d, &dense) || __builtin_mul_overflow(3 * d, two_thirds, &gated_floor) ||
        __builtin_mul_overflow(3 * d, f, &gated_rule)) {
        cli_error(CMD, "--hidden %" PRId64 ": parameter counts overflow 64 bits", d);
        return CLI_EXIT_FAIL;
    }
    gated_exact = dense;
    if (json) {
        printf("{\"hidden\": %" PRId64 ", \"multiple_of\": %" PRId64 ", \"ffn_dim_multiplier\": ",
               d, multiple_of);
        if (mult > 0) printf("%.17g", mult);
        else printf("null");
        printf(", \"intermediate_size\": %" PRId64 ", \"expansion_ratio\": %s"
               ", \"dense_intermediate_size\": %" PRId64 ", \"dense_params\": %" PRId64
               ", \"gated_two_thirds_intermediate\": %s, \"gated_two_thirds_params\": %" PRId64
               ", \"gated_two_thirds_floor_intermediate\": %" PRId64
               ", \"gated_two_thirds_floor_params\": %" PRId64 ", \"gated_params\": %" PRId64 "}\n",
               f, cli_json_num((double)f / (double)d, "%.17g"), 4 * d, dense,
               cli_json_num(8.0 * (double)d / 3.0, "%.17g"), gated_exact, two_thirds, gated_floor,
               gated_rule);
        return 0;
    }
    char a[32], b[32], c[32];
    printf("LLaMA FFN sizing rule for hidden_size D = %" PRId64 ":\n", d);
    printf("  4*D = %" PRId64 "; int(2*4*D/3) = %" PRId64 "\n", 4 * d, two_thirds);
    if (mult > 0)
        printf("  x ffn_dim_multiplier %g -> int(%g * %" PRId64 ") = %" PRId64 "\n", mult, mult,
               two_thirds, (int64_t)floor(mult * (double)two_thirds));
    printf("  rounded up to a multiple of %" PRId64 "\n", multiple_of);
    printf("intermediate_size = %" PRId64 "   (F/D = %.4g)\n\n", f, (double)f / (double)d);
    printf("Shazeer's 2/3 rule: a gated FFN has three D x F matrices (gate, up, down), a dense\n"
           "one two (up, down), so F = 2/3 * 4D keeps the gated FFN at the dense 4D FFN's size:\n");
    printf("  dense FFN, F = 4D = %-10" PRId64 "  2*D*F = %s\n", 4 * d, grouped(dense, a, sizeof a));
    printf("  gated FFN, F = 2/3*4D = %-9.6g  3*D*F = %s  (= 8*D^2, equal)\n", 8.0 * (double)d / 3.0,
           grouped(gated_exact, b, sizeof b));
    printf("  gated FFN, F = %-16" PRId64 "  3*D*F = %s  (%+.2f%% against dense)\n", two_thirds,
           grouped(gated_floor, c, sizeof c), pct(gated_floor - dense, dense));
    printf("  gated FFN, F = %-16" PRId64 "  3*D*F = %s  (%+.2f%% against dense; the rule's F)\n",
           f, grouped(gated_rule, a, sizeof a), pct(gated_rule - dense, dense));
    printf("(weights only, no biases; per layer)\n");
    return 0;
}

/* ---- a GGUF file ------------------------------------------------------------- */

/* The Hugging Face config.json a GGUF file's metadata amounts to, in a
 * malloc'd string: the counting then stays the library's one. */
static char *gguf_as_config_json(const char *path, ffn_status *st) {
    ffn_model_config c;
    ffn_checkpoint_info info;
    if ((*st = ffn_gguf_read_config(path, &c, &info))) return NULL;
    const int moe = c.num_experts > 0;
    /* the source family, under the Hugging Face model_type ffn_params counts
     * alike; the rest as llama (mixtral with experts) */
    static const char *const families[][2] = {
        {"qwen2moe", "qwen2_moe"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"},
        {"gemma", "gemma"},        {"gemma2", "gemma2"}, {"gemma3", "gemma3_text"},
        {"phi3", "phi3"},          {"olmoe", "olmoe"}, {"starcoder2", "starcoder2"}};
    const char *type = moe ? "mixtral" : "llama";
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(info.model_type, families[i][0])) type = families[i][1];
    const int mixtral_keys = !strcmp(type, "mixtral") || !strcmp(type, "olmoe");
    const int64_t Fe = c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        *st = FFN_ERR_NOMEM;
        return NULL;
    }
    if (!strcmp(info.model_type, "gpt2")) { /* GPT2Config's own keys */
        fprintf(f, "{\"model_type\": \"gpt2\", \"vocab_size\": %" PRId64 ", \"n_embd\": %" PRId64
                ", \"n_inner\": %" PRId64 ", \"n_layer\": %" PRId64 ", \"n_head\": %" PRId64
                ", \"n_positions\": %" PRId64 ", \"tie_word_embeddings\": %s}",
                c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers,
                c.num_attention_heads, c.max_position_embeddings,
                c.tie_word_embeddings ? "true" : "false");
        fclose(f);
        return text;
    }
    fprintf(f, "{\"model_type\": \"%s\", \"vocab_size\": %" PRId64 ", \"hidden_size\": %" PRId64
            ", \"intermediate_size\": %" PRId64 ", \"num_hidden_layers\": %" PRId64
            ", \"num_attention_heads\": %" PRId64 ", \"num_key_value_heads\": %" PRId64
            ", \"max_position_embeddings\": %" PRId64 ", \"tie_word_embeddings\": %s",
            type, c.vocab_size, c.hidden_size, mixtral_keys ? Fe : c.intermediate_size,
            c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
            c.max_position_embeddings, c.tie_word_embeddings ? "true" : "false");
    /* head_dim always: qwen3 and gemma default it otherwise */
    if (c.head_dim > 0 || (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0))
        fprintf(f, ", \"head_dim\": %" PRId64,
                c.head_dim > 0 ? c.head_dim : c.hidden_size / c.num_attention_heads);
    if (!strcmp(type, "starcoder2")) /* its one switch for every linear's bias */
        fprintf(f, ", \"use_bias\": %s", c.mlp_bias ? "true" : "false");
    if (moe)
        fprintf(f, ", \"%s\": %" PRId64 ", \"num_experts_per_tok\": %" PRId64
                ", \"moe_intermediate_size\": %" PRId64 ", \"shared_expert_intermediate_size\": %"
                PRId64, !strcmp(type, "mixtral") ? "num_local_experts" : "num_experts",
                c.num_experts, c.num_experts_per_tok, Fe, c.shared_expert_intermediate_size);
    fprintf(f, "}");
    fclose(f);
    return text;
}

/* ---- entry ------------------------------------------------------------------ */

int cmd_params(int argc, char **argv) {
    const char *config = NULL;
    int json = 0, per_layer = 0, suggest_mode = 0, show_conventions = 0;
    int64_t seq_len = 2048, hidden = 0, multiple_of = 256;
    double mult = 0, bandwidth = 20.0;
    int have_hidden = 0;
    const cli_opt opts[] = {
        {.name = "--seq-len", .type = CLI_INT, .dst = &seq_len, .metavar = "T", .imin = 1,
         .imax = (int64_t)1 << 40,
         .help = "context length for the attention-score FLOPs and the KV cache estimate"},
        {.name = "--bandwidth", .type = CLI_FLOAT, .dst = &bandwidth, .metavar = "GB/s",
         .fmin = 1e-3, .fmax = 1e6,
         .help = "memory bandwidth for the decode estimate (20: a dual-channel DDR4 desktop; "
                 "give your machine's figure)"},
        {.name = "--per-layer", .type = CLI_FLAG, .dst = &per_layer,
         .help = "also print one row per layer (" CLI_LAYER_HELP ")"},
        CLI_OPT_JSON(&json, "one JSON object on stdout: top-level integers total_params and "
                     "active_params, the breakdowns, the FLOPs, the conventions and every layer"),
        {.name = "--conventions", .type = CLI_FLAG, .dst = &show_conventions,
         .help = "print how parameters and FLOPs are counted (also in --help) and exit"},
        {.name = "--suggest-intermediate", .type = CLI_FLAG, .dst = &suggest_mode,
         .group = "--suggest-intermediate",
         .help = "the LLaMA FFN sizing rule for --hidden D, and Shazeer's 2/3 rule"},
        {.name = "--hidden", .type = CLI_INT, .dst = &hidden, .metavar = "D", .imin = 1,
         .imax = (int64_t)1 << 40, .seen = &have_hidden, .def = "",
         .help = "hidden_size (required with --suggest-intermediate)"},
        {.name = "--multiple-of", .type = CLI_INT, .dst = &multiple_of, .metavar = "M",
         .imin = 1, .imax = (int64_t)1 << 40, .help = "round F up to a multiple of M"},
        {.name = "--ffn-dim-multiplier", .type = CLI_FLOAT, .dst = &mult, .metavar = "X",
         .fmin = 1e-6, .fmax = 1e6, .def = "none", .help = "scale F by X before rounding"},
        {0}};
    const cli_pos pos[] = {{.name = "CONFIG.json", .dst = &config,
                            .help = "a Hugging Face config.json, or a GGUF file (its metadata)"},
                           {0}};
    static char epilog[8192];
    {
        FILE *mf = fmemopen(epilog, sizeof epilog - 1, "w");
        if (mf) {
            print_conventions(mf);
            fprintf(mf, "\nExit status: 0 ok, 1 a bad or unsupported config (the field is "
                        "named),\n2 bad usage.\n");
            fclose(mf);
        }
    }
    const cli_spec spec = {.cmd = CMD, .synopsis = synopsis, .about = about, .epilog = epilog,
                           .opts = opts, .pos = pos};
    int rc;
    if (cli_parse(&spec, argc, argv, &rc)) return rc;
    if (show_conventions) {
        print_conventions(stdout);
        return 0;
    }
    if (suggest_mode) {
        if (config) {
            cli_error(CMD, "--suggest-intermediate takes no CONFIG.json (got '%s')", config);
            return CLI_EXIT_USAGE;
        }
        if (!have_hidden) {
            cli_error(CMD, "--suggest-intermediate needs --hidden D");
            return CLI_EXIT_USAGE;
        }
        return suggest(hidden, multiple_of, mult, json);
    }
    if (have_hidden || mult > 0) {
        cli_error(CMD, "--hidden, --multiple-of and --ffn-dim-multiplier go with --suggest-intermediate");
        return CLI_EXIT_USAGE;
    }
    if (!config) {
        cli_error(CMD, "expected CONFIG.json (see ffn params --help)");
        return CLI_EXIT_USAGE;
    }
    ffn_params_options opt = {.seq_len = seq_len, .bandwidth_gbs = bandwidth};
    ffn_params_report *r = NULL;
    ffn_status st;
    if (ffn_checkpoint_is_gguf(config)) {
        char *text = gguf_as_config_json(config, &st);
        if (text) st = ffn_params_from_json(text, strlen(text), config, &opt, &r);
        free(text);
    } else {
        st = ffn_params_from_config(config, &opt, &r);
    }
    if (st != FFN_OK) return cli_fail(CMD, st);
    if (json) print_json(config, r);
    else print_report(config, r, per_layer);
    ffn_params_report_free(r);
    return 0;
}
