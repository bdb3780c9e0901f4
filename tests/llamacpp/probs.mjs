// probs.mjs -- llama.cpp (node-llama-cpp's prebuilt CPU binary) as the
// reference for a GGUF file: evaluate a token sequence and print, for every
// position t, the full next-token distribution after tokens[0..t], as JSON
// {"n_vocab": V, "tokens": [...], "probs": [[p_0 .. p_V-1], ...]} on stdout.
//
//   node probs.mjs MODEL.gguf "ID ID ..."
//
// Sampling is neutral (temperature 1, no top-k / top-p / min-p cut, no
// penalties), so the probabilities are softmax(logits).  The binary is
// never built or downloaded: a missing prebuilt binary is an error.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, idText] = process.argv.slice(2);
if (!modelPath || !idText) {
    process.stderr.write("usage: node probs.mjs MODEL.gguf \"ID ID ...\"\n");
    process.exit(2);
}
const tokens = idText.trim().split(/[\s,]+/).map(Number);
if (tokens.some((t) => !Number.isInteger(t) || t < 0)) {
    process.stderr.write(`probs.mjs: bad token ids '${idText}'\n`);
    process.exit(2);
}

const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, logLevel: LlamaLogLevel.error,
});
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true});
const context = await model.createContext({contextSize: Math.max(64, tokens.length + 8),
                                           batchSize: Math.max(64, tokens.length + 8),
                                           sequences: 1, threads: 1, flashAttention: false,
                                           // an fp32 KV cache: the default f16 one rounds K and V
                                           experimentalKvCacheKeyType: "F32",
                                           experimentalKvCacheValueType: "F32"});
const sequence = context.getSequence();
const neutral = {temperature: 1, topK: 0, topP: 1, minP: 0};
const input = tokens.map((t) => [t, {generateNext: {probabilities: true, options: neutral}}]);
const results = await sequence.controlledEvaluate(input);
const nVocab = model.tokens.vocabularySize ?? null;
const probs = [];
for (let i = 0; i < tokens.length; i++) {
    const map = results[i]?.next?.probabilities;
    if (!map) throw new Error(`no probabilities for position ${i}`);
    let n = nVocab;
    if (n == null) for (const k of map.keys()) n = Math.max(n ?? 0, k + 1);
    const row = new Array(n).fill(0);
    for (const [k, p] of map) row[k] = p;
    probs.push(row);
}
process.stdout.write(JSON.stringify({n_vocab: probs[0].length, tokens, probs}) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
