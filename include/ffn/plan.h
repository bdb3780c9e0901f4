/* ffn/plan.h -- what a parallel layout costs each rank: memory, traffic and
 * a predicted step time, from a config's parameter and FLOP accounting
 * (ffn/params.h).  Arithmetic only: nothing is allocated on a device and
 * no process is started.
 *
 * Part of the public API; include <ffn.h>, not this file.
 *
 * ---- the layout ------------------------------------------------------------
 * world = tp · dp · pp ranks.
 *   tp  tensor parallel (Megatron): attention heads split over the tp ranks
 *       of a group (q/k/v by columns, o by rows; tp divides the heads and the
 *       KV heads, so GQA groups stay whole); FFN gate/up by columns and down
 *       by rows (each rank holds ceil(F/tp) intermediate units, the GLU pair
 *       together); one all-reduce of the output after attention and one after
 *       the FFN in forward, and one each of dX in backward.  Norms, the router,
 *       the token embedding and the LM head are replicated in the group.
 *   ep  expert parallel, inside the data-parallel group (ep divides dp): the
 *       E routed experts of a MoE layer are spread over ep ranks, ceil(E/ep)
 *       each, every expert tp-split like a dense FFN; tokens travel to their
 *       experts and back with an all-to-all (routing assumed uniform: a
 *       token's K copies leave the rank with probability (ep-1)/ep).
 *   dp  data parallel: each rank takes micro_batch sequences a step; the
 *       gradients are all-reduced (ring) over dp, the experts' over the
 *       dp/ep ranks that hold the same experts; with zero1 the optimizer state
 *       is sharded over the same ranks (reduce-scatter + all-gather moves the
 *       same bytes as the all-reduce); with zero2 also the gradients kept
 *       after the reduce-scatter (the backward still writes the whole block:
 *       grad_backward_bytes).
 *   pp  pipeline parallel: ceil(L/pp) layers per stage, the embedding on the
 *       first stage and the final norm + head on the last; 1F1B keeps up to
 *       pp micro-batches of activations on the first stage; the bubble adds
 *       (pp-1)/n_micro of the compute time.
 * Every figure is for the busiest rank (the stage and shard that hold most).
 *
 * ---- what is counted -------------------------------------------------------
 *   weights, gradients, optimizer: parameters on the rank × bytes each
 *     (weight_bytes; grad_bytes; optim_bytes: Adam's m and v in fp32 = 8,
 *     plus 4 for an fp32 master copy when the weights are not fp32).
 *   activations (training): what a backward pass keeps, per token and layer,
 *     as ffn's own model keeps it: the residual stream and the two norms'
 *     inputs and outputs (4·D), q/k/v and the attention output
 *     ((2·H·dh + 2·G·dh)/tp), the attention probabilities (H/tp · T), the
 *     FFN's pre-activations and product (gated 3·F/tp, dense 2·F/tp; a MoE
 *     layer K·3·Fe/tp plus the router's E logits), in act_bytes each; and
 *     the logits and their gradient (2·V per token) on the last stage.
 *   traffic: bytes a rank SENDS: a ring all-reduce of S bytes over P ranks
 *     sends 2·(P-1)/P·S and takes 2·(P-1) latency steps; an all-to-all of S
 *     bytes sends (P-1)/P·S (EP rows carry D·act_bytes plus 16 bytes of
 *     (token, slot, weight)); a pipeline boundary sends B·T·D·act_bytes each
 *     way.
 *   step time: compute = FLOPs on the rank / (peak × core_share, the share
 *     of a core a rank gets when host_cores are shared by more threads);
 *     communication = bytes / link + latency × messages (measured: ffn
 *     bench link; peak: the rate the kernels reach at the model's shapes,
 *     as bench/bench_plan.sh measures it); step = compute + bubble + comm,
 *     or with overlap the DP gradient sums beside the backward (2/3 of the
 *     compute): compute/3 + bubble + max(2·compute/3, DP sums) + the other
 *     messages; also printed: the larger of compute and comm (perfect
 *     overlap).  Decode (batch 1): the bytes of
 *     the weights a token reads on a rank / memory bandwidth + the TP
 *     all-reduces of one token. */
#ifndef FFN_PLAN_H
#define FFN_PLAN_H
#pragma GCC visibility push(default) /* what this header declares is the exported API */

#include "core.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill with ffn_plan_options_default, then change what differs; the
 * defaults are given after each field. */
typedef struct ffn_plan_options {
    int64_t tp, ep, dp, pp;  /* 1 each */
    int zero1;               /* 0; 1: shard the optimizer state over the data-parallel ranks */
    int zero2;               /* 0; 1: ZeRO-2: the gradients too (kept between steps; implies zero1) */
    int64_t micro_batch;     /* 1: sequences per rank per micro-step */
    int64_t n_micro;         /* 1: micro-batches per step (gradient accumulation) */
    int64_t seq_len;         /* 2048: T */
    double weight_bytes;     /* 4 (fp32) per parameter */
    double grad_bytes;       /* 4 */
    double act_bytes;        /* 4: per activation element and per element sent */
    double peak_gflops;      /* 115: one Zen 4 core's fp32 FMA peak (230 measured on 2) */
    double link_gbps;        /* 10: GB/s a rank sends (shared memory between processes) */
    double latency_us;       /* 2: per message */
    double mem_gbps;         /* 16.75: half of the 33.5 GB/s read on a 2-core Zen 4 host */
    int overlap;             /* 0: the gradient sums after the backward; 1: buckets summed
                              * during the backward: step = forward + max(backward, DP sums) */
    int64_t host_cores;      /* 0: ignored; C: the world's ranks share C cores (one host), so
                              * a rank of `threads` threads computes at peak * min(1, C / (world * threads)) */
    int64_t threads;         /* 1: threads a rank (with host_cores) */
} ffn_plan_options;

void ffn_plan_options_default(ffn_plan_options *opt);

typedef struct ffn_plan_bytes {
    double tp, ep, dp, pp, total;
} ffn_plan_bytes;

typedef struct ffn_plan {
    ffn_plan_options opt;     /* with the defaults filled in */
    int64_t world;            /* tp · dp · pp */
    int64_t layers_per_stage; /* ceil(L / pp) */
    int64_t experts_per_rank; /* ceil(E / ep); 0 when not MoE */
    int64_t heads_per_rank, kv_heads_per_rank;
    int64_t ffn_units_per_rank; /* ceil(F / tp) (0 when no dense layer) */

    /* memory on the busiest rank */
    int64_t params_rank;        /* parameters held */
    int64_t params_rank_expert; /* of which routed experts */
    double weight_bytes, grad_bytes, optim_bytes, act_bytes, total_bytes;
    /* the gradient block the backward writes: grad_bytes, or under zero2
     * the rank's whole block (grad_bytes is then the share kept after the
     * reduce-scatter; total_bytes counts the share) */
    double grad_backward_bytes;

    /* traffic a rank sends in one step (all micro-batches), and per token */
    int64_t tokens_rank_step;   /* micro_batch · n_micro · T */
    int64_t tokens_global_step; /* tokens_rank_step · dp */
    ffn_plan_bytes sent_step;
    double sent_per_token;      /* sent_step.total / tokens_rank_step */
    double messages_step;       /* latency steps in one step */

    /* time */
    double flops_rank_step;     /* training FLOPs on the rank in one step */
    double compute_s, comm_s, bubble_s;
    double step_s_serial;       /* compute + bubble + comm */
    double step_s_overlap;      /* max(compute + bubble, comm) */
    double comm_dp_s;           /* of comm_s: the data-parallel gradient sums */
    double core_share;          /* 1, or C / (world * threads) when the ranks share C cores */
    double step_s;              /* the predicted step: step_s_serial, or with overlap
                                 * compute/3 + bubble + max(2 compute/3, comm_dp) + the rest of comm */
    double tokens_per_s;        /* tokens_global_step / step_s */

    /* decode, batch 1, one token */
    double decode_bytes_rank;   /* weight bytes a token reads on the busiest rank */
    double decode_comm_s;
    double decode_s;            /* decode_bytes_rank / mem + decode_comm_s (+ pp stages in turn) */
} ffn_plan;

/* Plan layout `opt` for the accounted model `r`.  Errors name the flag and
 * the numbers: tp not dividing the heads or the KV heads, ep larger than the
 * experts or not dividing dp, ep on a model without experts, pp larger than
 * the layers, sizes out of range, overflow. */
ffn_status ffn_plan_compute(const ffn_params_report *r, const ffn_plan_options *opt,
                            ffn_plan *out);

/* ---- one layer alone (what `ffn bench layer --tp` and `ffn bench moe --ep`
 * time under mpirun, so a prediction can be checked against them) --------
 * FFN layer (experts 0): D, F (gated: three matrices, else two), N tokens,
 * opt->tp ranks: the busiest rank's ceil(F/tp) units cost 2·N·D·units·m
 * FLOPs forward (m = 3 gated, 2 dense) and twice that backward; forward
 * sends one ring all-reduce of N·D·act_bytes (2·(tp-1)/tp of it, 2·(tp-1)
 * messages), backward another.
 * MoE layer (experts E > 0, intermediate = Fe, top_k K), N tokens on each
 * of opt->ep ranks: the router 2·N·D·E; routing assumed uniform, so the
 * busiest rank's ceil(E/ep) experts run N·K·ep·ceil(E/ep)/E rows at
 * 2·D·Fe·m FLOPs each; backward twice the forward.  The dispatch and the
 * combine each send (ep-1)/ep·N·K rows of D·act_bytes (ffn's rows travel
 * grouped by expert: no metadata) and ep-1 messages, the counts' all-to-all
 * ep-1 more; backward the same again.  Times: FLOPs / peak_gflops and
 * bytes / link_gbps + latency · messages, added (no overlap). */
typedef struct ffn_plan_layer_options {
    int64_t hidden, intermediate; /* D, F (MoE: Fe) */
    int gated;                    /* 1: gate, up and down; 0: up and down */
    int64_t tokens;               /* N (MoE: on each rank) */
    int64_t experts, top_k;       /* 0 for an FFN layer; E, K */
} ffn_plan_layer_options;

typedef struct ffn_plan_layer {
    double flops_forward, flops_backward;   /* on the busiest rank */
    double sent_forward, sent_backward;     /* bytes a rank sends */
    double messages_forward, messages_backward;
    double forward_comm_s, forward_s;       /* forward: communication, and all of it */
    double forward_backward_comm_s, forward_backward_s;
} ffn_plan_layer;

/* Errors name the field and the numbers (sizes < 1, top_k > experts, ep >
 * experts, tp > F). */
ffn_status ffn_plan_layer_compute(const ffn_plan_layer_options *layer, const ffn_plan_options *opt,
                                  ffn_plan_layer *out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* FFN_PLAN_H */
