// probs_many.mjs -- probs.mjs for many GGUF files in one process (one
// llama.cpp start-up): for each MODEL, one JSON line
// {"model": path, "probs": [[p_0 .. p_V-1], ...]} (the next-token
// distribution after tokens[0..t] for every position t), or
// {"model": path, "error": message} when llama.cpp cannot load or run it.
//
//   node probs_many.mjs "ID ID ..." MODEL.gguf [MODEL.gguf ...]
//
// Sampling is neutral (temperature 1, no cuts, no penalties) and the KV
// cache fp32, as in probs.mjs; never a build or a download of llama.cpp.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [idText, ...models] = process.argv.slice(2);
if (!idText || models.length === 0) {
    process.stderr.write("usage: node probs_many.mjs \"ID ID ...\" MODEL.gguf [MODEL.gguf ...]\n");
    process.exit(2);
}
const tokens = idText.trim().split(/[\s,]+/).map(Number);
if (tokens.some((t) => !Number.isInteger(t) || t < 0)) {
    process.stderr.write(`probs_many.mjs: bad token ids '${idText}'\n`);
    process.exit(2);
}
const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, logLevel: LlamaLogLevel.error,
});
const neutral = {temperature: 1, topK: 0, topP: 1, minP: 0};
for (const modelPath of models) {
    let model = null, context = null;
    try {
        model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true});
        context = await model.createContext({contextSize: Math.max(64, tokens.length + 8),
                                             batchSize: Math.max(64, tokens.length + 8),
                                             sequences: 1, threads: 1, flashAttention: false,
                                             experimentalKvCacheKeyType: "F32",
                                             experimentalKvCacheValueType: "F32"});
        const input = tokens.map((t) => [t, {generateNext: {probabilities: true, options: neutral}}]);
        const results = await context.getSequence().controlledEvaluate(input);
        const n = model.tokens.vocabularySize;
        const probs = [];
        for (let i = 0; i < tokens.length; i++) {
            const map = results[i]?.next?.probabilities;
            if (!map) throw new Error(`no probabilities for position ${i}`);
            const row = new Array(n).fill(0);
            for (const [k, p] of map) row[k] = p;
            probs.push(row);
        }
        process.stdout.write(JSON.stringify({model: modelPath, probs}) + "\n");
    } catch (e) {
        process.stdout.write(JSON.stringify({model: modelPath, error: String(e?.message ?? e)}) + "\n");
    }
    if (context) await context.dispose();
    if (model) await model.dispose();
}
await llama.dispose();
