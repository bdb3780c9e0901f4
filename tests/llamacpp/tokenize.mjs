// tokenize.mjs -- llama.cpp (node-llama-cpp's prebuilt CPU binary) as the
// reference tokenizer of a GGUF file: encode each FILE (read as UTF-8) with
// the model's own vocabulary, no special tokens added, and print one line
// per file: the ids separated by spaces, or "ERROR message" when llama.cpp
// cannot encode the text.
//
//   node tokenize.mjs MODEL.gguf FILE...
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readFileSync} from "node:fs";

const [modelPath, ...files] = process.argv.slice(2);
if (!modelPath || files.length === 0) {
    process.stderr.write("usage: node tokenize.mjs MODEL.gguf FILE...\n");
    process.exit(2);
}
const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, logLevel: LlamaLogLevel.error,
});
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true, vocabOnly: true});
for (const f of files) {
    const text = readFileSync(f, "utf8");
    try {
        const ids = model.tokenize(text, false);
        process.stdout.write(Array.from(ids).join(" ") + "\n");
    } catch (e) {
        process.stdout.write("ERROR " + String(e.message || e).replace(/\s+/g, " ") + "\n");
    }
}
