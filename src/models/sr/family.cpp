// The SR UNet's side of the model-family seam (genperf/model_family.h). Its quantizable tensors
// are the weights of its convolutions and linear layers. A checkpoint holds each as a matrix of
// one row per output channel: a convolution filter [OC, K, K, IC] as [OC, K*K*IC] (the view
// the convolution multiplies by), so that the quantizers' blocks run along the filter's inputs;
// files keep the float filters 4-D and quantized ones in their matrix form.
#include <algorithm>
#include <filesystem>

#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "io/safetensors.h"
#include "models/sr/family.h"

namespace genperf::sr {
namespace {

namespace fs = std::filesystem;

// The layers whose weights are matrices, by the last part of their names, and their kinds.
constexpr std::pair<const char*, const char*> kMatrices[] = {
    {"fc1", "time.fc1"}, {"fc2", "time.fc2"}, {"conv_in", "conv_in"}, {"conv1", "conv1"},
    {"conv2", "conv2"},  {"temb", "temb"},    {"skip", "skip"},       {"down", "downsample"},
    {"up", "upsample"},  {"qkv", "qkv"},      {"proj", "proj"},       {"conv", "out.conv"}};

// "a.b.c.weight" -> "c"; "" when the name does not end in .weight.
std::string layer_part(const std::string& name) {
  static const std::string suffix = ".weight";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  const std::string stem = name.substr(0, name.size() - suffix.size());
  const size_t dot = stem.rfind('.');
  return dot == std::string::npos ? stem : stem.substr(dot + 1);
}

// "down.0.res.1.conv1.weight" -> "down.0.res.1": the block a matrix belongs to.
std::string block_of(const std::string& name) {
  const size_t last = name.rfind('.', name.size() - std::string(".weight").size() - 1);
  return last == std::string::npos ? "" : name.substr(0, last);
}

// Outside the blocks: the time MLP, the first and the last convolution.
bool outside_blocks(const std::string& name) {
  return name.rfind("time.", 0) == 0 || name == "conv_in.weight" || name == "out.conv.weight";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + "]";
}

UNetConfig config_of(const Checkpoint& ck) { return unet_config_from_json(ck.config_json, ck.source); }

// Shape the checkpoint holds a parameter in: matrices 2-D, the rest as declared.
std::vector<int64_t> held_shape(const ParamSpec& p, bool matrix) {
  if (!matrix || p.shape.size() == 2) return p.shape;
  return {p.shape[0], int64_t(p.size()) / p.shape[0]};
}

class UNetFamily final : public ModelFamily {
 public:
  const char* name() const override { return "sr-unet"; }
  bool owns_architecture(const std::string& a) const override { return a == kUNetArchitecture; }

  // `layer` is -1 here: the blocks are numbered in quantizable(), which sees the network.
  std::optional<TensorRole> role_of(const std::string& name) const override {
    const std::string part = layer_part(name);
    // out.conv and the downsample/upsample convolutions are named by their path.
    for (const auto& [last, kind] : kMatrices) {
      if (part != last) continue;
      if (part == "conv" && name != "out.conv.weight") return std::nullopt;
      return TensorRole{name, -1, kind, name == "out.conv.weight", false};
    }
    return std::nullopt;
  }

  // `layer` numbers the blocks in forward order (a residual block, an attention block, a
  // down- or up-sampling convolution: "down.0.res.0", "down.0.attn.0", "down.0", ...); the time
  // MLP, conv_in and out.conv are outside them (-1).
  std::vector<TensorRole> quantizable(const Checkpoint& ck) const override {
    const UNet<float> net(config_of(ck));
    std::vector<TensorRole> roles;
    std::string block;
    int layer = -1;
    for (const ParamSpec& p : net.params()) {
      const auto it = ck.tensors.find(p.name);
      if (it == ck.tensors.end() || it->second.ndim() != 2) continue;
      auto r = role_of(p.name);
      if (!r) continue;
      if (!outside_blocks(p.name)) {
        if (block_of(p.name) != block) block = block_of(p.name), ++layer;
        r->layer = layer;
      }
      roles.push_back(std::move(*r));
    }
    return roles;
  }

  std::map<std::string, Tensor> hf_tensors(const Checkpoint& ck) const override { return ck.tensors; }

  void read_hf_config(Checkpoint& ck, const Json& j, const std::string& path) const override {
    (void)unet_config_from_json(j, path);  // validates, naming the file and field
    ck.architecture = kUNetArchitecture;
    ck.config_json = j;
  }

  void adopt_hf_tensors(Checkpoint& ck, const std::map<std::string, std::string>& origin) const override {
    const UNet<float> net(config_of(ck));
    auto file_of = [&](const std::string& n) {
      const auto it = origin.find(n);
      return it == origin.end() ? ck.source : it->second;
    };
    for (const ParamSpec& p : net.params()) {
      const auto it = ck.tensors.find(p.name);
      GP_CHECK(it != ck.tensors.end(), "[sr model] ", ck.source, ": tensor ", p.name, " is missing");
      Tensor& t = it->second;
      const bool matrix = role_of(p.name).has_value();
      const bool as_declared = t.shape() == p.shape, as_matrix = matrix && t.shape() == held_shape(p, true);
      GP_CHECK(as_declared || as_matrix, "[sr model] ", file_of(p.name), ": tensor ", p.name, " is ", t.describe(),
               ", expected the config's shape ", shape_text(p.shape));
      const bool floating = traits(t.dtype()).is_float;
      GP_CHECK(floating || (matrix && as_matrix), "[sr model] ", file_of(p.name), ": tensor ", p.name, " is ",
               t.describe(), "; only the matrices of convolutions and linear layers may be quantized");
      if (matrix && !as_matrix) t = (t.is_contiguous() ? t : t.clone()).view(held_shape(p, true));
    }
    GP_CHECK(ck.tensors.size() == net.params().size(), "[sr model] ", ck.source, ": ", ck.tensors.size(),
             " tensors where the config has ", net.params().size());
  }

  void save_hf(const std::string& dir, const Checkpoint& ck, const std::map<std::string, Tensor>& tensors,
               const std::vector<std::string>& extra_files) const override {
    const UNet<float> net(config_of(ck));
    std::vector<std::pair<std::string, Tensor>> out;
    for (const ParamSpec& p : net.params()) {
      const auto it = tensors.find(p.name);
      GP_CHECK(it != tensors.end(), "[sr model] ", dir, ": no tensor ", p.name, " to write");
      const Tensor& t = it->second;
      const bool floating = traits(t.dtype()).is_float;
      out.emplace_back(p.name, floating ? (t.is_contiguous() ? t : t.clone()).view(p.shape) : t);
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    GP_CHECK(!ec, "[sr model] ", dir, ": cannot create directory: ", ec.message());
    for (const std::string& f : extra_files) fs::copy_file(f, fs::path(dir) / fs::path(f).filename(), ec);
    write_safetensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
    write_file_atomic((fs::path(dir) / "config.json").string(), ck.config_json.dump(2) + "\n");
  }
};

}  // namespace

UNet<float> unet_from_checkpoint(const Checkpoint& ck) {
  GP_CHECK(ck.arch() == kUNetArchitecture, "[sr model] ", ck.source, ": architecture '", ck.arch(),
           "' is not an SR model's (", kUNetArchitecture, ")");
  UNet<float> net(config_of(ck));
  std::span<float> w = net.weights();
  for (const ParamSpec& p : net.params()) {
    const auto it = ck.tensors.find(p.name);
    GP_CHECK(it != ck.tensors.end(), "[sr model] ", ck.source, ": tensor ", p.name, " is missing");
    GP_CHECK(size_t(it->second.numel()) == p.size(), "[sr model] ", ck.source, ": tensor ", p.name, " is ",
             it->second.describe(), ", expected ", shape_text(p.shape));
    const Tensor t = it->second.dtype() == DType::F32 && it->second.is_contiguous() ? it->second
                                                                                     : it->second.to(DType::F32);
    std::copy_n(t.data<float>(), p.size(), w.data() + p.offset);
  }
  return net;
}

UNet<float> load_sr_model(const std::string& dir, Checkpoint* files) {
  GP_CHECK(fs::is_regular_file(fs::path(dir) / "config.json"), "[sr model] ", dir,
           ": no config.json (not an SR model directory)");
  Checkpoint ck = load_checkpoint(dir, false);
  UNet<float> net = unet_from_checkpoint(ck);
  if (files) *files = std::move(ck);
  return net;
}

const ModelFamily& unet_family() {
  static const UNetFamily family;
  return family;
}

}  // namespace genperf::sr
