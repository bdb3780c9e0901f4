/* run_dir.c -- what the trainer writes into an ffn run directory.
 *
 * A run directory (config.json, model.safetensors, the tokenizer,
 * train_state.safetensors, metrics.jsonl) is written whole beside DIR and
 * swapped in by the directory swap (src/base/dirswap.c), which this file
 * uses and does not own.  Here: config.json (with ffn's keys) and the
 * weights (model.safetensors, by the model's tensor table).  The training
 * state (train_state.safetensors) is written and read by train.c, which
 * owns the trainer; reading a run directory for inference is
 * src/load/run_dir.c. */
#include "train/train_internal.h"
#include "ffn/safetensors.h"
#include "ffn/train.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- what goes into the directory ---------------------------------------------- */

/* Add ffn's own keys to the config.json that ffn_model_config_save wrote:
 * the file is one JSON object, so the new keys go before its last '}'. */
ffn_status run_dir_config_add_tokenizer(const char *path, const char *kind, const char *file) {
    FILE *f = fopen(path, "rb");
    if (!f) return ffn_error(FFN_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    int too_big = !feof(f);
    fclose(f);
    if (too_big) return ffn_error(FFN_ERR_INTERNAL, "%s: unexpectedly large", path);
    buf[n] = '\0';
    char *close = strrchr(buf, '}');
    if (!close) return ffn_error(FFN_ERR_INTERNAL, "%s: not a JSON object", path);
    char *open = strchr(buf, '{');
    int empty = 1;
    for (char *p = open + 1; p < close; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') empty = 0;
    f = fopen(path, "wb");
    if (!f) return ffn_error(FFN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    /* Trim whitespace before the '}' to keep the layout tidy. */
    char *end = close;
    while (end > open + 1 && (end[-1] == ' ' || end[-1] == '\n' || end[-1] == '\r')) end--;
    fwrite(buf, 1, (size_t)(end - buf), f);
    fprintf(f, "%s\n  \"ffn_tokenizer\": \"%s\",\n  \"ffn_tokenizer_file\": \"%s\"\n}\n",
            empty ? "" : ",", kind, file);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ffn_error(FFN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return FFN_OK;
}

/* model.safetensors: every tensor of the table under its HF name. */
ffn_status run_dir_save_weights(ffn_model *model, const char *path) {
    ffn_st_writer *w = NULL;
    ffn_status st = ffn_st_writer_create(&w);
    if (st != FFN_OK) return st;
    const float *params = ffn_model_params(model, NULL);
    const int64_t n = ffn_model_num_tensors(model);
    for (int64_t i = 0; i < n && st == FFN_OK; i++) {
        const ffn_model_tensor *ten = ffn_model_tensor_at(model, i);
        st = ffn_st_writer_add(w, ten->name, FFN_DTYPE_F32, ten->ndim, ten->shape,
                               params + ten->offset);
    }
    if (st == FFN_OK) st = ffn_st_writer_set_metadata(w, "format", "pt");
    if (st == FFN_OK) st = ffn_st_writer_save(w, path);
    ffn_st_writer_free(w);
    return st;
}
