// llamacpp_speed.mjs -- llama.cpp's prompt and decode speed on a GGUF file,
// timed the way `ffn bench model` times ffn (bench/bench_llamacpp.sh runs
// both on the same file, token ids and thread count).  llama.cpp is
// node-llama-cpp's prebuilt CPU binary (never built or downloaded here).
//
//   node llamacpp_speed.mjs MODEL.gguf THREADS P C G R "ID ID ..."
//
// What is timed (wall clock around node-llama-cpp's context evaluation,
// which runs llama_decode on a worker thread):
//   prompt  one evaluation of the first P ids from an empty sequence, as
//           one batch (batchSize = ubatch = P), logits of the last id only
//           (it is sampled greedily): P / time, the best of R runs;
//   decode  the first C ids evaluated (not timed), then G single-id
//           evaluations of ids C .. C+G-1, each with its logits and a greedy
//           sample: G / their total time.
// Context: max(P, C+G) + 16 positions, one sequence, the KV cache in
// llama.cpp's default type (f16), flash attention off, memory-mapped
// weights.  Prints one JSON object on stdout.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, threadsText, pText, cText, gText, rText, idText] = process.argv.slice(2);
if (!modelPath || !idText) {
    process.stderr.write("usage: node llamacpp_speed.mjs MODEL.gguf THREADS P C G R \"ID ID ...\"\n");
    process.exit(2);
}
const [threads, P, C, G, R] = [threadsText, pText, cText, gText, rText].map(Number);
const ids = idText.trim().split(/[\s,]+/).map(Number);
if (ids.length < Math.max(P, C + G) || ids.some((t) => !Number.isInteger(t) || t < 0)) {
    process.stderr.write(`llamacpp_speed.mjs: need ${Math.max(P, C + G)} token ids, got ${ids.length}\n`);
    process.exit(2);
}

const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, logLevel: LlamaLogLevel.error,
});
const t0 = performance.now();
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true});
const loadS = (performance.now() - t0) / 1e3;
const batch = Math.max(P, 16);
const context = await model.createContext({contextSize: Math.max(P, C + G) + 16,
                                           batchSize: batch, sequences: 1, threads,
                                           flashAttention: false});
const sequence = context.getSequence();
const greedy = {generateNext: {token: true, options: {temperature: 0}}};

// warm-up: a few ids through every layer (page faults, first-call setup)
await sequence.controlledEvaluate([...ids.slice(0, 3), [ids[3], greedy]]);
await sequence.clearHistory();

let promptS = 0;
for (let r = 0; P > 0 && r < R; r++) {
    const input = ids.slice(0, P).map((t, i) => (i === P - 1 ? [t, greedy] : t));
    const s = performance.now();
    const out = await sequence.controlledEvaluate(input);
    const dt = (performance.now() - s) / 1e3;
    if (out[P - 1]?.next?.token == null) throw new Error("no token after the prompt");
    if (r === 0 || dt < promptS) promptS = dt;
    await sequence.clearHistory();
}

let decodeS = 0, stepMin = 0;
if (G > 0) {
    if (C > 0) await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(0, C));
    for (let g = 0; g < G; g++) {
        const s = performance.now();
        const out = await sequence.controlledEvaluate([[ids[C + g], greedy]]);
        const dt = (performance.now() - s) / 1e3;
        if (out[0]?.next?.token == null) throw new Error(`no token at decode step ${g}`);
        decodeS += dt;
        if (g === 0 || dt < stepMin) stepMin = dt;
    }
}
process.stdout.write(JSON.stringify({
    bench: "llamacpp", model: modelPath, threads, load_s: loadS, batch_size: batch,
    prompt_tokens: P, repeats: R, prompt_s: promptS, prompt_tok_s: promptS > 0 ? P / promptS : 0,
    context: C, gen: G, decode_s: decodeS, decode_tok_s: decodeS > 0 ? G / decodeS : 0,
    decode_step_min_ms: stepMin * 1e3,
}) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
