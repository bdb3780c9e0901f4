/* ffn.h -- the public API of libffn: the feed-forward half of a Transformer
 * block (dense FFN, the GLU family, Mixture of Experts), forward and
 * backward, and what is built around it.
 *
 * One include for users; the sections live in include/ffn/ *.h:
 *   core.h         status codes, errors, version, execution context
 *   layer.h        the dense / gated FFN layer
 *   safetensors.h  reading (mmap) and writing safetensors files
 *   moe.h          Mixture of Experts
 *   params.h       parameter and FLOP accounting from config.json
 *   data.h         tokenizers and the built-in corpus
 *   model.h        the decoder-only Transformer (forward, backward, KV cache)
 *   tap.h          taps: named points of the forward to capture and patch
 *   profile.h      where a training step's time goes (ffn train --profile)
 *   train.h        AdamW, the training loop, checkpoints, generation
 *   rng.h          the library's seeded pseudo-random generator
 *   json.h         the strict JSON reader
 *   collapse.h     merging a linear FFN into one matrix, and the check
 *   gguf.h         GGUF files (the tensor types they hold: dtype.h)
 *   dtype.h        the ggml tensor types, their table, fp16/bf16 conversions
 *   quant.h        low-precision weights inside a model (quantize, attach bytes)
 *   eval.h         perplexity, and KL / top-1 against a reference model
 *
 * Conventions, stated once for every section: weights are W[out][in] and a
 * projection is y = x · Wᵀ + b; tensors are row-major fp32; every fallible
 * call returns ffn_status and records a message for ffn_last_error();
 * create/free pairs, free(NULL) a no-op; hot paths never allocate.
 */
#ifndef FFN_H
#define FFN_H

#include "ffn/core.h"
#include "ffn/layer.h"
#if __has_include("ffn/safetensors.h")
#include "ffn/safetensors.h"
#endif
#if __has_include("ffn/moe.h")
#include "ffn/moe.h"
#endif
#if __has_include("ffn/params.h")
#include "ffn/params.h"
#endif
#if __has_include("ffn/data.h")
#include "ffn/data.h"
#endif
#if __has_include("ffn/vocab.h")
#include "ffn/vocab.h"
#endif
#if __has_include("ffn/checkpoint.h")
#include "ffn/checkpoint.h"
#endif
#if __has_include("ffn/model.h")
#include "ffn/model.h"
#endif
#if __has_include("ffn/profile.h")
#include "ffn/profile.h"
#endif
#if __has_include("ffn/tap.h")
#include "ffn/tap.h"
#endif
#if __has_include("ffn/train.h")
#include "ffn/train.h"
#endif
#if __has_include("ffn/inspect.h")
#include "ffn/inspect.h"
#endif

#if __has_include("ffn/rng.h")
#include "ffn/rng.h"
#endif
#if __has_include("ffn/json.h")
#include "ffn/json.h"
#endif
#if __has_include("ffn/collapse.h")
#include "ffn/collapse.h"
#endif
#if __has_include("ffn/intervene.h")
#include "ffn/intervene.h"
#endif
#if __has_include("ffn/trace.h")
#include "ffn/trace.h"
#endif
#if __has_include("ffn/gguf.h")
#include "ffn/gguf.h"
#endif
#if __has_include("ffn/plan.h")
#include "ffn/plan.h"
#endif
#if __has_include("ffn/quant.h")
#include "ffn/quant.h"
#endif
#if __has_include("ffn/edit.h")
#include "ffn/edit.h"
#endif
#if __has_include("ffn/eval.h")
#include "ffn/eval.h"
#endif
#if __has_include("ffn/transcoder.h")
#include "ffn/transcoder.h"
#endif

#endif /* FFN_H */
