// Prefill and decode speed of a GGUF file in llama.cpp (node-llama-cpp's prebuilt CPU build), as
// `genperf bench infer` measures them, for bench/compare_llamacpp.py:
//   node bench.mjs MODEL.gguf [--prefill 128,512] [--decode-prompt 128] [--decode-tokens 64]
//                  [--reps 5] [--threads N] [--seed 1]
// Prompt ids are drawn from the vocabulary with a fixed seed. Prefill of T tokens: an empty
// context, T tokens in one batch, logits of the last. Decode: after a prompt, tokens one at a time,
// each the greedy choice after the last. One warm-up of each, then --reps
// repetitions. For each, the wall time seen here and llama.cpp's own count
// (llama_perf_context: "prompt eval time" for prefill, "eval time" for decode), which leaves out
// the JavaScript around the calls. Prints one JSON record.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const args = process.argv.slice(2);
const opt = {prefill: "128,512", "decode-prompt": "128", "decode-tokens": "64", reps: "5", threads: "0", seed: "1"};
let modelPath;
for (let i = 0; i < args.length; ++i) {
  if (args[i].startsWith("--")) {
    const k = args[i].slice(2);
    if (!(k in opt) || i + 1 >= args.length) {
      console.error(`bench.mjs: unknown option or missing value: ${args[i]}`);
      process.exit(2);
    }
    opt[k] = args[++i];
  } else modelPath = args[i];
}
if (!modelPath) {
  console.error("usage: node bench.mjs MODEL.gguf [--prefill 128,512] [--decode-prompt 128] [--decode-tokens 64] [--reps 5] [--threads N]");
  process.exit(2);
}
const prefill = opt.prefill.split(",").map(Number);
const decodePrompt = Number(opt["decode-prompt"]), decodeTokens = Number(opt["decode-tokens"]);
const reps = Number(opt.reps), threads = Number(opt.threads) || (await import("node:os")).availableParallelism();

// llama.cpp's performance lines, captured from its log.
let perf = [];
const llama = await getLlama({
  gpu: false, build: "never", logLevel: LlamaLogLevel.info,
  logger: (level, message) => { if (message.includes("eval time")) perf.push(message); },
});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const ctxSize = Math.max(...prefill, decodePrompt + decodeTokens) + 1;
const context = await model.createContext({contextSize: ctxSize, batchSize: ctxSize, threads, performanceTracking: true});
const sequence = context.getSequence();
// Ids from 3 on: the special tokens (unknown, BOS, EOS) come first in genperf's vocabularies.
let state = BigInt(opt.seed) * 6364136223846793005n + 1442695040888963407n;
const nVocab = model.fileInfo.metadata.llama?.vocab_size ?? model.fileInfo.metadata.tokenizer.ggml.tokens.length;
const ids = Array.from({length: ctxSize}, () => {
  state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  return 3 + Number((state >> 33n) % BigInt(nVocab - 3));
});

// The next token chosen inside llama.cpp (temperature 0: the argmax), so that no logits cross into
// JavaScript: turning 4096 or more of them into a Map per token kept the main thread busy, and on
// two cores it took one from llama.cpp's two threads (decode 3x slower with 2 threads than with 1).
const greedy = {token: true, options: {temperature: 0}};

// llama.cpp's milliseconds for `kind` ("prompt eval" or "eval") since the last call.
async function llamaMs(kind) {
  perf = [];
  await context.printTimings();
  for (const line of perf) {
    const m = line.match(new RegExp(`\\b${kind} time\\s*=\\s*([0-9.]+) ms`));
    if (m && !(kind === "eval" && line.includes("prompt eval"))) return Number(m[1]);
  }
  return NaN;
}

async function runPrefill(T) {
  await sequence.clearHistory();
  await llamaMs("prompt eval");
  const t0 = process.hrtime.bigint();
  const input = ids.slice(0, T);
  input[T - 1] = [input[T - 1], {generateNext: greedy}];
  await sequence.controlledEvaluate(input);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  return {wall_s: wall, llama_s: (await llamaMs("prompt eval")) / 1e3};
}

async function runDecode() {
  await sequence.clearHistory();
  const prompt = ids.slice(0, decodePrompt);
  prompt[decodePrompt - 1] = [prompt[decodePrompt - 1], {generateNext: greedy}];
  let out = await sequence.controlledEvaluate(prompt);
  let next = out[decodePrompt - 1].next.token;
  await llamaMs("eval");
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < decodeTokens; ++i) {
    out = await sequence.controlledEvaluate([[next, {generateNext: greedy}]]);
    next = out[0].next.token;
  }
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  return {wall_s: wall, llama_s: (await llamaMs("eval")) / 1e3};
}


function summary(runs, tokens) {
  const per = (k) => runs.map((r) => tokens / r[k]).sort((a, b) => a - b);
  const median = (v) => (v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2);
  const stats = (v) => ({median: median(v), min: v[0], max: v[v.length - 1], values: v});
  return {tokens_per_s_wall: stats(per("wall_s")), tokens_per_s_llama: stats(per("llama_s"))};
}

const result = {engine: "llama.cpp (node-llama-cpp 3.22.1, prebuilt CPU)", model: modelPath, threads, reps,
                prefill: [], decode: null};
for (const T of prefill) {
  await runPrefill(T);  // warm-up
  const runs = [];
  for (let r = 0; r < reps; ++r) runs.push(await runPrefill(T));
  result.prefill.push({tokens: T, ...summary(runs, T)});
}
await runDecode();
const runs = [];
for (let r = 0; r < reps; ++r) runs.push(await runDecode());
result.decode = {prompt: decodePrompt, tokens: decodeTokens, ...summary(runs, decodeTokens)};
console.log(JSON.stringify(result));
await context.dispose();
await model.dispose();
await llama.dispose();
