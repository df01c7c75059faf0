// LoRA adapter directories in Hugging Face PEFT's layout: adapter_config.json and
// adapter_model.safetensors with tensors named base_model.model.<module>.lora_A.weight [r, in]
// and .lora_B.weight [out, r]. Written in a temporary directory and renamed into place, so a
// failed save leaves the previous adapter (if any) intact.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/train.h"
#include "io/safetensors.h"
#include "train/graph.h"

namespace genperf {
namespace fs = std::filesystem;

namespace {

// A float as the short decimal a person would write (0.05, not 0.05000000074505806).
double short_decimal(float v) { return std::strtod(cat(v).c_str(), nullptr); }

fs::path dir_path(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // a trailing slash
  GP_CHECK(!p.empty(), "[lora] empty adapter directory name");
  return p;
}

}  // namespace

LoraConfig read_lora_config(const std::string& dir) {
  const std::string path = (dir_path(dir) / "adapter_config.json").string();
  const Json j = Json::parse_file(path);
  auto where = [&](const char* key) { return cat("[lora] ", path, ": ", key); };
  if (const Json* t = j.find("peft_type"); t && !t->is_null())
    GP_CHECK(t->is_string() && t->as_string() == "LORA", where("peft_type"), " is ", t->dump(),
             ", expected \"LORA\"");
  for (const char* flag : {"use_dora", "fan_in_fan_out", "use_rslora"})
    if (const Json* f = j.find(flag); f && f->is_bool())
      GP_CHECK(!f->as_bool(), where(flag), " is true; genperf supports plain LoRA only");
  if (const Json* b = j.find("bias"); b && b->is_string())
    GP_CHECK(b->as_string() == "none", where("bias"), " is \"", b->as_string(), "\"; genperf supports \"none\" only");
  for (const char* key : {"layers_to_transform", "modules_to_save", "rank_pattern", "alpha_pattern"})
    if (const Json* v = j.find(key))
      GP_CHECK(v->is_null() || (v->is_object() && v->as_object().empty()) ||
                   (v->is_array() && v->as_array().empty()),
               where(key), " is set; genperf supports one rank and alpha for all modules of all layers");
  LoraConfig c;
  c.rank = int(j.at("r").as_int());
  c.alpha = float(j.at("lora_alpha").as_number());
  if (const Json* d = j.find("lora_dropout"); d && !d->is_null()) c.dropout = float(d->as_number());
  const Json& tm = j.at("target_modules");
  GP_CHECK(tm.is_array(), where("target_modules"), " is ", tm.type_name(),
           "; genperf needs a list of module names");
  c.targets.clear();
  for (const Json& t : tm.as_array()) c.targets.push_back(t.as_string());
  try {
    c.validate();
  } catch (const Error& e) {
    fail("[lora] ", path, ": ", e.what());
  }
  return c;
}

void TrainModel::save_lora_adapter(const std::string& dir, const std::string& base_model_name,
                                   DType dtype) const {
  const LoraConfig& lc = lora_config();
  Json::Array targets;
  for (const std::string& t : lc.targets) targets.emplace_back(t);
  const Json cfg = Json::Object{{"peft_type", "LORA"},
                                {"task_type", "CAUSAL_LM"},
                                {"base_model_name_or_path", base_model_name},
                                {"r", int64_t(lc.rank)},
                                {"lora_alpha", short_decimal(lc.alpha)},
                                {"lora_dropout", short_decimal(lc.dropout)},
                                {"target_modules", std::move(targets)},
                                {"bias", "none"},
                                {"fan_in_fan_out", false},
                                {"inference_mode", true},
                                {"init_lora_weights", true},
                                {"use_rslora", false},
                                {"use_dora", false},
                                {"modules_to_save", nullptr},
                                {"layers_to_transform", nullptr},
                                {"revision", nullptr}};
  const std::map<std::string, Tensor> tensors = lora_tensors(dtype);
  const std::vector<std::pair<std::string, Tensor>> ordered(tensors.begin(), tensors.end());

  const fs::path target = dir_path(dir);
  const fs::path tmp = cat(target.string(), ".tmp.", getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  GP_CHECK(!ec, "[lora] cannot create directory ", tmp.string(), ": ", ec.message());
  try {
    write_safetensors((tmp / "adapter_model.safetensors").string(), ordered, {{"format", "pt"}});
    write_file_atomic((tmp / "adapter_config.json").string(), cfg.dump(2) + "\n");
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // Swap in: the old directory moves aside first (rename cannot replace a non-empty one).
  const fs::path old = cat(target.string(), ".old.", getpid());
  const bool had = fs::exists(target);
  if (had) {
    fs::remove_all(old, ec);
    fs::rename(target, old, ec);
    GP_CHECK(!ec, "[lora] cannot move the existing ", target.string(), " aside: ", ec.message());
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string msg = ec.message();
    if (had) fs::rename(old, target, ec);
    fail("[lora] cannot rename ", tmp.string(), " to ", target.string(), ": ", msg);
  }
  if (had) fs::remove_all(old, ec);
}

void TrainModel::load_lora_adapter(const std::string& dir, uint64_t seed) {
  const fs::path d = dir_path(dir);
  LoraConfig file = read_lora_config(d.string());
  const std::string st_path = (d / "adapter_model.safetensors").string();
  const SafetensorsFile st = read_safetensors(st_path);
  if (lora_enabled()) {
    const LoraConfig& on = lora_config();
    const std::set<std::string> a(on.targets.begin(), on.targets.end()), b(file.targets.begin(), file.targets.end());
    GP_CHECK(on.rank == file.rank && on.alpha == file.alpha && a == b, "[lora] ", d.string(),
             ": the adapter (r ", file.rank, ", alpha ", file.alpha, ", ", file.targets.size(),
             " targets) does not match the model's LoRA configuration (r ", on.rank, ", alpha ",
             on.alpha, ", ", on.targets.size(), " targets)");
    file = on;
  } else {
    file.seed = seed;
  }
  // Every tensor is checked before the model changes.
  const train::LoraLayout lay = train::lora_layout(config(), train::param_layout(config()), file);
  std::set<std::string> expected;
  std::vector<Tensor> src;
  for (const ParamInfo& pi : lay.params) {
    expected.insert(pi.name);
    auto it = st.tensors.find(pi.name);
    GP_CHECK(it != st.tensors.end(), "[lora] ", st_path, ": missing tensor ", pi.name);
    Tensor t = it->second;
    GP_CHECK(t.shape() == pi.shape, "[lora] ", st_path, ": tensor ", pi.name, " is ", t.describe(),
             ", expected shape [", pi.shape[0], ", ", pi.shape[1], "]");
    GP_CHECK(traits(t.dtype()).is_float && traits(t.dtype()).block_size == 1, "[lora] ", st_path,
             ": tensor ", pi.name, " is ", t.describe(), "; expected a float type");
    src.push_back(t.is_contiguous() ? t : t.clone());
  }
  for (const std::string& name : st.names)
    GP_CHECK(expected.count(name), "[lora] ", st_path, ": unexpected tensor ", name,
             " (not an adapter of this model's layers and targets)");
  if (!lora_enabled()) enable_lora(file);
  std::span<float> buf = trainable_params();
  for (size_t i = 0; i < lay.params.size(); ++i)
    traits(src[i].dtype()).to_f32(src[i].raw(), buf.data() + lay.params[i].offset, int64_t(lay.params[i].numel));
}

}  // namespace genperf
