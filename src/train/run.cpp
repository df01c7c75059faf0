// A training run in its output directory (genperf/trainer.h, run_training): resume, the run
// record, the loss log, the trainer, the exported model.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/trainer.h"

namespace genperf {
namespace {

// The log of an earlier run, keeping the records up to `step` (a resumed run rewrites what came
// after its state).
std::string log_prefix(const std::string& path, int64_t step) {
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const Json j = Json::parse(line, path);
    const Json* s = j.find("step");
    if (s && s->as_number() <= double(step)) kept += line + "\n";
  }
  return kept;
}

}  // namespace

Json run_training(TrainModel& m, const TokenSequences& train, const TokenSequences& val, const TrainerConfig& tc,
                  const TrainRunFiles& files, const TrainRunOptions& o, Json run_info) {
  Trainer trainer(m, train, val, tc);
  if (o.resume) {
    GP_CHECK(std::filesystem::exists(files.state), "[train] --resume: ", files.state, " does not exist");
    trainer.load_state(files.state);
  }
  const int64_t first = trainer.step();
  const int64_t until = o.stop_at >= 0 ? std::min(tc.steps, o.stop_at) : tc.steps;
  GP_CHECK(until > first || first == tc.steps, "[train] --stop-at ", until, " is not after the current step ", first);
  if (o.on_start) o.on_start(first, until);

  // Rank 0 alone writes the shared files; every rank trains.
  const DataParallel& dp = trainer.data_parallel();
  const bool writer = dp.rank() == 0;
  // The run's record first, so an interrupted run still says how it was started.
  run_info["train_sequences"] = train.size();
  run_info["validation_sequences"] = val.size();
  run_info["tokens_per_step"] = trainer.tokens_per_step();
  run_info["parameters"] = int64_t(m.num_params());
  run_info["trainable_parameters"] = int64_t(m.trainable_params().size());
  run_info["ranks"] = dp.ranks();
  run_info["shard"] = shard_mode_name(dp.options().shard);
  run_info["bucket_bytes"] = int64_t(dp.options().bucket_bytes);
  run_info["model_state_bytes_per_rank"] = trainer.model_state().to_json();
  std::ofstream log_out;
  if (writer) {
    write_file_atomic(files.run, run_info.dump(2) + "\n");
    write_file_atomic(files.log, o.resume ? log_prefix(files.log, first) : "");
    log_out.open(files.log, std::ios::app);
  }
  double last_loss = NAN, last_val = NAN, tok_s_sum = 0;
  int64_t tok_s_n = 0;
  Trainer::Callbacks cb;
  cb.on_step = [&](const StepRecord& r) {
    last_loss = r.loss;
    tok_s_sum += r.tokens_per_s;
    ++tok_s_n;
    if (writer) log_out << r.to_json().dump() << "\n" << std::flush;
    if (o.callbacks.on_step) o.callbacks.on_step(r);
  };
  cb.on_eval = [&](int64_t step, double v) {
    last_val = v;
    if (writer) log_out << Json(Json::Object{{"step", step}, {"val_loss", v}}).dump() << "\n" << std::flush;
    if (o.callbacks.on_eval) o.callbacks.on_eval(step, v);
  };
  trainer.run(until, files.state, cb);

  Json summary = Json::Object{{"out", files.dir},
                              {"step", trainer.step()},
                              {"steps", tc.steps},
                              {"final_loss", last_loss},
                              {"mean_tokens_per_s", tok_s_n ? tok_s_sum / double(tok_s_n) : 0.0}};
  if (!std::isnan(last_val)) summary["val_loss"] = last_val;
  summary["ranks"] = dp.ranks();
  summary["shard"] = shard_mode_name(dp.options().shard);
  summary["comm_bytes_per_step"] = dp.step_comm_bytes();
  summary["model_state_bytes_per_rank"] = trainer.model_state().to_json();
  // Fully sharded, the parameters are gathered whole for what is exported (the model here, or
  // LoRA's adapter by the caller once training is done); collective.
  if (trainer.step() == tc.steps) trainer.gather_params();
  if (trainer.step() == tc.steps && o.export_model && writer) {
    save_hf_checkpoint(files.dir, m.config(), m.tensors(o.export_dtype), o.extra_files);
    summary["model"] = files.dir;
    summary["dtype"] = dtype_name(o.export_dtype);
  }
  return summary;
}

}  // namespace genperf
