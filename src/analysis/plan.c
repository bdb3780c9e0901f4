/* plan.c -- memory, traffic and step time of a parallel layout, per rank
 * (see include/ffn/plan.h for the layout and what is counted). */
#include "base/common.h"
#include "ffn/plan.h"

#include <math.h>
#include <string.h>

static int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

/* Parameters of the part held by one rank: `count` spread over `units`
 * units of which the rank holds ceil(units / parts). */
static double share(int64_t count, int64_t units, int64_t parts) {
    if (units <= 0 || count == 0) return (double)count / (double)(parts > 0 ? parts : 1);
    return (double)count * (double)ceil_div(units, parts) / (double)units;
}

typedef struct stage_load {
    double params, expert_params; /* held */
    double act;                   /* activation elements per token kept for backward */
    double flops;                 /* training FLOPs per token */
    double decode_params;         /* parameters a decoded token reads */
    int64_t layers, moe_layers;
} stage_load;

/* "plan: FLAG d does not divide OF n WHY" unless d divides n. */
static ffn_status must_divide(const char *flag, int64_t d, const char *of, int64_t n,
                              const char *why) {
    if (n % d == 0) return FFN_OK;
    return ffn_error(FFN_ERR_INVALID_ARG, "plan: %s %lld does not divide %s%lld%s", flag,
                     (long long)d, of, (long long)n, why);
}

static ffn_status check(const ffn_params_report *r, const ffn_plan_options *o) {
    const int64_t lim = (int64_t)1 << 20;
    struct { const char *flag; int64_t v; } sizes[] = {
        {"--tp", o->tp}, {"--ep", o->ep}, {"--dp", o->dp}, {"--pp", o->pp},
        {"--micro-batch", o->micro_batch}, {"--n-micro", o->n_micro}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].v < 1 || sizes[i].v > lim)
            return ffn_error(FFN_ERR_INVALID_ARG, "plan: %s %lld: expected 1..%lld",
                             sizes[i].flag, (long long)sizes[i].v, (long long)lim);
    if (o->seq_len < 1 || o->seq_len > ((int64_t)1 << 40))
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --seq-len %lld: expected 1..2^40",
                         (long long)o->seq_len);
    ffn_status st;
    if ((st = must_divide("--tp", o->tp, "the ", r->n_heads, " attention heads")) ||
        (st = must_divide("--tp", o->tp, "the ", r->n_kv_heads,
                          " key/value heads (GQA groups stay whole on a rank)")))
        return st;
    if (o->ep > 1 && !r->n_moe_layers)
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --ep %lld: the model has no MoE layer",
                         (long long)o->ep);
    if (r->n_moe_layers && o->ep > r->n_experts)
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --ep %lld is larger than the %lld experts",
                         (long long)o->ep, (long long)r->n_experts);
    if ((st = must_divide("--ep", o->ep, "--dp ", o->dp,
                          " (experts are spread inside the data-parallel group)")))
        return st;
    if (o->pp > r->n_layers)
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --pp %lld is larger than the %lld layers",
                         (long long)o->pp, (long long)r->n_layers);
    struct { const char *flag; double v; } reals[] = {
        {"--weight-bytes", o->weight_bytes}, {"--grad-bytes", o->grad_bytes},
        {"--act-bytes", o->act_bytes},       {"--peak-gflops", o->peak_gflops},
        {"--link-gbps", o->link_gbps},       {"--mem-gbps", o->mem_gbps}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        if (!(reals[i].v > 0) || !isfinite(reals[i].v) || reals[i].v > 1e12)
            return ffn_error(FFN_ERR_INVALID_ARG, "plan: %s %g: expected a number > 0",
                             reals[i].flag, reals[i].v);
    if (o->host_cores < 0 || o->host_cores > lim || o->threads < 1 || o->threads > lim)
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --host-cores %lld, --threads %lld: expected "
                         "0..%lld, 1..%lld", (long long)o->host_cores, (long long)o->threads,
                         (long long)lim, (long long)lim);
    if (!(o->latency_us >= 0) || !isfinite(o->latency_us))
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --latency-us %g: expected >= 0",
                         o->latency_us);
    return FFN_OK;
}

/* One layer's load on a rank, per token. */
static void layer_load(const ffn_params_report *r, const ffn_params_layer *l,
                       const ffn_plan_options *o, stage_load *s) {
    const ffn_param_counts *p = &l->params;
    const int64_t tp = o->tp, T = o->seq_len, D = r->hidden_size;
    double attn = share(p->attention, r->n_heads, tp);
    double dense = share(p->ffn_dense, r->intermediate_size, tp);
    double shared = share(p->ffn_shared, r->shared_intermediate_size, tp);
    double experts = 0, experts_read = 0;
    if (l->is_moe && r->n_experts) {
        double one = share(p->ffn_routed / r->n_experts, r->moe_intermediate_size, tp);
        int64_t here = ceil_div(r->n_experts, o->ep);
        experts = one * (double)here;
        experts_read = one * (double)(r->top_k < here ? r->top_k : here);
    }
    double held = attn + dense + shared + experts + (double)p->router + (double)p->norms;
    s->params += held;
    s->expert_params += experts;
    s->decode_params += held - experts + experts_read;

    /* what backward keeps, per token (elements) */
    double H = (double)r->n_heads, G = (double)r->n_kv_heads;
    double dq = (double)r->head_dim_qk, dv = (double)r->head_dim_v;
    double a = 4.0 * (double)D;                                   /* residuals, norms */
    a += (H * dq + G * dq + G * dv + H * dv) / (double)tp;        /* q, k, v, attention out */
    a += H / (double)tp * (double)T;                              /* probabilities */
    if (l->is_moe) {
        a += (double)r->top_k * 3.0 * (double)ceil_div(r->moe_intermediate_size, tp);
        a += (double)r->n_experts;
        if (r->shared_intermediate_size)
            a += 3.0 * (double)ceil_div(r->shared_intermediate_size, tp);
    } else if (r->intermediate_size) {
        int gated = !strncmp(r->ffn_kind, "gated", 5);
        a += (gated ? 3.0 : 2.0) * (double)ceil_div(r->intermediate_size, tp);
    }
    s->act += a;
    /* training FLOPs: 3 x forward, the rank's 1/tp of it (experts: the
     * rank's tokens through K experts, wherever those live) */
    s->flops += 3.0 * (double)l->flops.total / (double)tp;
    s->layers++;
    s->moe_layers += l->is_moe;
}

void ffn_plan_options_default(ffn_plan_options *o) {
    memset(o, 0, sizeof *o);
    o->tp = o->ep = o->dp = o->pp = 1;
    o->micro_batch = o->n_micro = 1;
    o->seq_len = 2048;
    o->weight_bytes = o->grad_bytes = o->act_bytes = 4;
    o->peak_gflops = 115;
    o->link_gbps = 10;
    o->latency_us = 2;
    o->mem_gbps = 16.75;
    o->threads = 1;
}

ffn_status ffn_plan_compute(const ffn_params_report *r, const ffn_plan_options *opt,
                            ffn_plan *out) {
    if (!r || !opt || !out) return ffn_error(FFN_ERR_INVALID_ARG, "plan: NULL argument");
    ffn_plan_options o = *opt;
    ffn_status st = check(r, &o);
    if (st) return st;

    ffn_plan p;
    memset(&p, 0, sizeof p);
    p.opt = o;
    p.world = o.tp * o.dp * o.pp;
    p.layers_per_stage = ceil_div(r->n_layers, o.pp);
    p.experts_per_rank = r->n_moe_layers ? ceil_div(r->n_experts, o.ep) : 0;
    p.heads_per_rank = r->n_heads / o.tp;
    p.kv_heads_per_rank = r->n_kv_heads / o.tp;
    p.ffn_units_per_rank = ceil_div(r->intermediate_size, o.tp);

    const int64_t T = o.seq_len, D = r->hidden_size, V = r->vocab_size;
    const double tok = (double)o.micro_batch * (double)T; /* per micro-batch */
    p.tokens_rank_step = o.micro_batch * o.n_micro * T;
    p.tokens_global_step = p.tokens_rank_step * o.dp;

    /* stages: pick the busiest for each figure */
    stage_load best = {0};
    double best_mem = -1, best_flops = -1, decode_s_sum = 0, decode_comm = 0;
    const double ab = o.act_bytes;
    double optim_per_param = 8.0 + (o.weight_bytes < 4 ? 4.0 : 0.0);
    for (int64_t s = 0; s < o.pp; s++) {
        stage_load L = {0};
        int64_t lo = s * p.layers_per_stage;
        int64_t hi = lo + p.layers_per_stage < r->n_layers ? lo + p.layers_per_stage
                                                           : r->n_layers;
        for (int64_t i = lo; i < hi; i++) layer_load(r, &r->layers[i], &o, &L);
        if (s == 0) { /* embeddings: a lookup, no FLOPs */
            double emb = (double)(r->params.embed_token + r->params.embed_position +
                                  r->params.embed_token_type);
            L.params += emb;
        }
        if (s == o.pp - 1) { /* final norm, head and the logits */
            L.params += (double)r->params.head;
            if (r->n_layers && r->params.norms) {
                double in_layers = 0;
                for (int64_t i = 0; i < r->n_layers; i++) in_layers += (double)r->layers[i].params.norms;
                L.params += (double)r->params.norms - in_layers;
                L.decode_params += (double)r->params.norms - in_layers;
            }
            if (o.pp > 1 && r->tied_embeddings) L.params += (double)r->params.embed_token;
            L.flops += 3.0 * (double)r->forward.head;
            L.act += 2.0 * (double)V;
            L.decode_params += (double)(r->params.head ? r->params.head : r->params.embed_token);
        }
        /* 1F1B: the first stage keeps up to pp micro-batches in flight */
        int64_t inflight = o.pp - s < o.n_micro ? o.pp - s : o.n_micro;
        double act_bytes = L.act * tok * ab * (double)inflight;
        const int z1 = o.zero1 || o.zero2;
        const double shared = L.params - L.expert_params;
        const double grads = shared * o.grad_bytes / (o.zero2 ? (double)o.dp : 1.0) +
                             L.expert_params * o.grad_bytes / (o.zero2 ? (double)(o.dp / o.ep) : 1.0);
        double mem = L.params * o.weight_bytes + grads + act_bytes +
                     shared * optim_per_param / (z1 ? (double)o.dp : 1.0) +
                     L.expert_params * optim_per_param / (z1 ? (double)(o.dp / o.ep) : 1.0);
        if (mem > best_mem) {
            best_mem = mem;
            p.params_rank = (int64_t)llround(L.params);
            p.params_rank_expert = (int64_t)llround(L.expert_params);
            p.weight_bytes = L.params * o.weight_bytes;
            p.grad_bytes = grads;
            p.grad_backward_bytes = L.params * o.grad_bytes;
            p.optim_bytes = mem - p.weight_bytes - p.grad_bytes - act_bytes;
            p.act_bytes = act_bytes;
            p.total_bytes = mem;
        }
        if (L.flops > best_flops) {
            best_flops = L.flops;
            best = L;
        }
        /* decode: stages run one after another for one token */
        double comm1 = 0;
        if (o.tp > 1)
            comm1 = (double)(2 * L.layers) *
                    (2.0 * (double)(o.tp - 1) / (double)o.tp * (double)D * ab / (o.link_gbps * 1e9) +
                     2.0 * (double)(o.tp - 1) * o.latency_us * 1e-6);
        decode_comm += comm1;
        decode_s_sum += L.decode_params * o.weight_bytes / (o.mem_gbps * 1e9) + comm1;
        if (L.decode_params * o.weight_bytes > p.decode_bytes_rank)
            p.decode_bytes_rank = L.decode_params * o.weight_bytes;
    }
    if (o.pp > 1) decode_s_sum += (double)(o.pp - 1) * (D * ab / (o.link_gbps * 1e9) + o.latency_us * 1e-6);
    p.decode_comm_s = decode_comm;
    p.decode_s = decode_s_sum;

    /* traffic of the busiest (compute) stage in one step */
    const double nm = (double)o.n_micro;
    double msgs = 0, dp_msgs = 0;
    if (o.tp > 1) {
        double ring = 2.0 * (double)(o.tp - 1) / (double)o.tp;
        p.sent_step.tp = 4.0 * (double)best.layers * nm * ring * tok * (double)D * ab;
        msgs += 4.0 * (double)best.layers * nm * 2.0 * (double)(o.tp - 1);
    }
    if (o.ep > 1) {
        double frac = (double)(o.ep - 1) / (double)o.ep;
        p.sent_step.ep = 4.0 * (double)best.moe_layers * nm * frac * tok * (double)r->top_k *
                         ((double)D * ab + 16.0);
        msgs += 4.0 * (double)best.moe_layers * nm * (double)(o.ep - 1);
    }
    if (o.dp > 1) {
        double dense = best.params - best.expert_params;
        p.sent_step.dp = 2.0 * (double)(o.dp - 1) / (double)o.dp * dense * o.grad_bytes;
        int64_t rep = o.dp / o.ep;
        if (rep > 1)
            p.sent_step.dp += 2.0 * (double)(rep - 1) / (double)rep * best.expert_params * o.grad_bytes;
        dp_msgs = 2.0 * (double)(o.dp - 1) * (double)(best.layers + 1); /* a bucket per layer */
        msgs += dp_msgs;
    }
    if (o.pp > 1) {
        p.sent_step.pp = 2.0 * nm * tok * (double)D * ab;
        msgs += 2.0 * nm;
    }
    p.sent_step.total = p.sent_step.tp + p.sent_step.ep + p.sent_step.dp + p.sent_step.pp;
    p.sent_per_token = p.sent_step.total / (double)p.tokens_rank_step;
    p.messages_step = msgs;

    p.flops_rank_step = best.flops * (double)p.tokens_rank_step;
    p.core_share = 1;
    if (o.host_cores > 0 && p.world * o.threads > o.host_cores)
        p.core_share = (double)o.host_cores / (double)(p.world * o.threads);
    p.compute_s = p.flops_rank_step / (o.peak_gflops * 1e9 * p.core_share);
    p.bubble_s = p.compute_s * (double)(o.pp - 1) / nm;
    p.comm_s = p.sent_step.total / (o.link_gbps * 1e9) + msgs * o.latency_us * 1e-6;
    p.comm_dp_s = p.sent_step.dp / (o.link_gbps * 1e9) + dp_msgs * o.latency_us * 1e-6;
    p.step_s_serial = p.compute_s + p.bubble_s + p.comm_s;
    p.step_s_overlap = p.compute_s + p.bubble_s > p.comm_s ? p.compute_s + p.bubble_s : p.comm_s;
    if (o.overlap) { /* the DP sums run beside the backward (2/3 of the compute) */
        double bwd = 2.0 * p.compute_s / 3.0;
        p.step_s = p.compute_s - bwd + p.bubble_s + (bwd > p.comm_dp_s ? bwd : p.comm_dp_s) +
                   (p.comm_s - p.comm_dp_s);
    } else p.step_s = p.step_s_serial;
    p.tokens_per_s = (double)p.tokens_global_step / p.step_s;
    *out = p;
    return FFN_OK;
}

/* ---- one layer alone ---------------------------------------------------------- */

ffn_status ffn_plan_layer_compute(const ffn_plan_layer_options *l, const ffn_plan_options *o,
                                  ffn_plan_layer *out) {
    if (!l || !o || !out) return ffn_error(FFN_ERR_INVALID_ARG, "plan: NULL argument");
    const int64_t lim = (int64_t)1 << 30;
    struct { const char *flag; int64_t v; } sizes[] = {
        {"--hidden", l->hidden}, {"--intermediate", l->intermediate}, {"--tokens", l->tokens},
        {"--tp", o->tp}, {"--ep", o->ep}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].v < 1 || sizes[i].v > lim)
            return ffn_error(FFN_ERR_INVALID_ARG, "plan: %s %lld: expected 1..%lld", sizes[i].flag,
                             (long long)sizes[i].v, (long long)lim);
    if (l->experts < 0 || l->experts > lim)
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --experts %lld: expected 0..%lld",
                         (long long)l->experts, (long long)lim);
    if (l->experts && (l->top_k < 1 || l->top_k > l->experts))
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --top-k %lld: expected 1..%lld (the experts)",
                         (long long)l->top_k, (long long)l->experts);
    if (l->experts && o->ep > l->experts)
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --ep %lld is larger than the %lld experts",
                         (long long)o->ep, (long long)l->experts);
    if (!l->experts && o->tp > l->intermediate)
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --tp %lld is larger than --intermediate %lld",
                         (long long)o->tp, (long long)l->intermediate);
    if (!(o->peak_gflops > 0) || !(o->link_gbps > 0) || !(o->act_bytes > 0) ||
        !(o->latency_us >= 0))
        return ffn_error(FFN_ERR_INVALID_ARG, "plan: --peak-gflops %g, --link-gbps %g, "
                         "--latency-us %g: expected > 0, > 0, >= 0",
                         o->peak_gflops, o->link_gbps, o->latency_us);
    ffn_plan_layer p;
    memset(&p, 0, sizeof p);
    const double D = (double)l->hidden, N = (double)l->tokens, m = l->gated ? 3.0 : 2.0;
    const double ab = o->act_bytes, lat = o->latency_us * 1e-6, link = o->link_gbps * 1e9;
    if (!l->experts) {
        const int64_t P = o->tp;
        p.flops_forward = 2.0 * N * D * (double)ceil_div(l->intermediate, P) * m;
        if (P > 1) {
            p.sent_forward = 2.0 * (double)(P - 1) / (double)P * N * D * ab;
            p.messages_forward = 2.0 * (double)(P - 1);
        }
    } else {
        const int64_t P = o->ep, E = l->experts, K = l->top_k;
        const double rows = N * (double)K * (double)P * (double)ceil_div(E, P) / (double)E;
        p.flops_forward = 2.0 * N * D * (double)E + rows * 2.0 * D * (double)l->intermediate * m;
        if (P > 1) {
            const double away = (double)(P - 1) / (double)P * N * (double)K;
            p.sent_forward = 2.0 * away * D * ab + (double)(P - 1) * (double)ceil_div(E, P) * 4.0;
            p.messages_forward = 3.0 * (double)(P - 1);
        }
    }
    p.flops_backward = 2.0 * p.flops_forward;
    p.sent_backward = p.sent_forward;
    p.messages_backward = l->experts ? p.messages_forward * 2.0 / 3.0 : p.messages_forward;
    if (l->experts && o->ep > 1) /* backward re-sends rows only: the counts are known */
        p.sent_backward = p.sent_forward - (double)(o->ep - 1) * (double)ceil_div(l->experts, o->ep) * 4.0;
    const double peak = o->peak_gflops * 1e9;
    p.forward_comm_s = p.sent_forward / link + p.messages_forward * lat;
    p.forward_s = p.flops_forward / peak + p.forward_comm_s;
    p.forward_backward_comm_s = p.forward_comm_s + p.sent_backward / link + p.messages_backward * lat;
    p.forward_backward_s = (p.flops_forward + p.flops_backward) / peak + p.forward_backward_comm_s;
    *out = p;
    return FFN_OK;
}
