/* layer_moe.h -- the MoE half of `ffn layer`: tools/cmd_layer.c hands a
 * config with num_experts (or num_local_experts / n_routed_experts) to
 * layer_run_moe, implemented in tools/cmd_layer_moe.c.  Same files, same
 * contract as for the FFN layer (see `ffn layer --help`).  Returns the exit
 * code (0 ok, 1 failure, with the message already printed). */
#ifndef FFN_LAYER_MOE_H
#define FFN_LAYER_MOE_H

int layer_run_moe(const char *config_path, const char *weights_path, const char *input_path,
                  const char *output_path, int backward, int threads, int precision);

/* `ffn bench moe ...` (tools/cmd_bench_moe.c), dispatched by tools/cmd_bench.c. */
int cmd_bench_moe(int argc, char **argv);

#endif
