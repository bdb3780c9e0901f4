/* model_grad.c -- the training forward with taps and a loss of the
 * caller's (ffn_model_forward_backward_taps, include/ffn/tap.h): what it
 * accepts, and the calls around the model's own forward, head and
 * backward (src/nn/model.c, ffn_model_backward_from_logits).  Gradients
 * at a point are kept by the taps (src/nn/tap.c).
 *
 * Why only ADD patches of residual-width points: backward retraces the
 * saved activations, so a patch must leave the Jacobian of the rest of
 * the forward unchanged.  x + delta does; x := v and x · s do not (the
 * gradient upstream of them would be wrong), and a patch inside the FFN
 * would disagree with what the layer saved for its backward.
 *
 * Letters: B batch, T positions, N = B·T rows, D hidden, V vocabulary. */
#include "nn/tap_internal.h"

ffn_status ffn_model_forward_backward_taps(ffn_model *m, const int32_t *tokens, int64_t B,
                                           int64_t T, ffn_logits_grad_fn fn, void *user,
                                           double *loss) {
    static const char *name = "ffn_model_forward_backward_taps";
    if (!m || !tokens || !fn)
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: model, tokens and fn must not be NULL", name);
    if (!ffn_model_grads(m, NULL))
        return ffn_error(FFN_ERR_INVALID_ARG, "%s: the model was created without training "
                         "(ffn_model_options.training = 0)", name);
    ffn_taps *t = *ffn_model_taps_ref(m);
    ffn_status st;
    if (t && (st = ffn_taps_train_begin(t, B, T, name))) return st;
    st = ffn_model_backward_from_logits(m, tokens, B, T, fn, user, loss);
    if (t) ffn_taps_train_end(t, st == FFN_OK);
    return st;
}
