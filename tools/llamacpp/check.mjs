// Runs GGUF files in llama.cpp (the prebuilt CPU build that node-llama-cpp ships) and writes what
// it computes, for genperf's tests to compare with genperf's own results:
//   node check.mjs JOBS.json OUT_PREFIX
// JOBS.json: {"threads": 2, "jobs": [{"model": "m.gguf", "windows": [[id, ...], ...],
//                                     "texts": ["...", ...]}, ...]}
// Each window is evaluated from an empty context, with the model's BOS first when it has one; for
// every position the full logits of the next token are written as little-endian f32, job after
// job, window after window (OUT_PREFIX.logits). OUT_PREFIX.json has, per job, the vocabulary size,
// the BOS id, the number of positions written, llama.cpp's tokenization of each text (no BOS),
// llama.cpp's description of the model (llama_model_desc: architecture, size and the name of the
// file's general.file_type, "(guessed)" when the file has none) and general.quantization_version
// as node-llama-cpp's GGUF reader finds it (null when absent).
// A model llama.cpp refuses or aborts on ends this process with a non-zero status and its message.
import {getLlama} from "node-llama-cpp";
import {readFileSync, writeFileSync, openSync, writeSync, closeSync, renameSync} from "node:fs";

const [, , jobsPath, outPrefix] = process.argv;
if (!jobsPath || !outPrefix) {
  console.error("usage: node check.mjs JOBS.json OUT_PREFIX");
  process.exit(2);
}
const spec = JSON.parse(readFileSync(jobsPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});

const logitsTmp = `${outPrefix}.logits.tmp`;
const fd = openSync(logitsTmp, "w");
const results = [];
for (const job of spec.jobs) {
  const model = await llama.loadModel({modelPath: job.model, gpuLayers: 0});
  const bos = model.tokens.bos;
  const windows = job.windows ?? [];
  const longest = Math.max(8, ...windows.map((w) => w.length + 1));
  const context = await model.createContext({contextSize: longest, batchSize: longest, threads: spec.threads ?? 2});
  const sequence = context.getSequence();
  let vocab = 0, positions = 0;
  for (const w of windows) {
    await sequence.clearHistory();
    const ids = bos == null ? w : [bos, ...w];
    const out = await sequence.controlledEvaluate(ids.map((t) => [t, {generateNext: {logits: true}}]));
    for (let i = 0; i < ids.length; ++i) {
      const logits = out[i]?.next?.logits;
      if (!logits) throw new Error(`${job.model}: no logits at position ${i}`);
      if (!vocab) vocab = logits.size;
      const row = new Float32Array(vocab);
      for (const [token, value] of logits) row[token] = value;
      writeSync(fd, Buffer.from(row.buffer));
      ++positions;
    }
  }
  const tokens = (job.texts ?? []).map((t) => Array.from(model.tokenize(t, false)));
  const quantizationVersion = model.fileInfo.metadata?.general?.quantization_version ?? null;
  results.push({model: job.model, vocab, bos: bos ?? -1, positions, tokens, description: model.typeDescription,
                quantization_version: quantizationVersion});
  await context.dispose();
  await model.dispose();
}
closeSync(fd);
renameSync(logitsTmp, `${outPrefix}.logits`);
writeFileSync(`${outPrefix}.json.tmp`, JSON.stringify({llama_cpp: "node-llama-cpp 3.22.1 (prebuilt CPU)", jobs: results}));
renameSync(`${outPrefix}.json.tmp`, `${outPrefix}.json`);
await llama.dispose();
