// The SR model's config.json (genperf/unet.h): read with errors that name the file and field,
// written in the same form.
#include <algorithm>

#include "genperf/error.h"
#include "genperf/unet.h"

namespace genperf::sr {

bool UNetConfig::has_attention(int64_t level) const {
  return std::find(attention_levels.begin(), attention_levels.end(), level) != attention_levels.end();
}

void UNetConfig::validate(const std::string& src) const {
  auto positive = [&](int64_t v, const char* name) {
    GP_CHECK(v > 0, "[sr config] ", src, ": ", name, " must be positive, got ", v);
  };
  positive(channels, "channels");
  positive(base, "base");
  positive(res_blocks, "res_blocks");
  positive(head_channels, "head_channels");
  positive(groups, "groups");
  positive(scale, "scale");
  positive(timesteps, "timesteps");
  GP_CHECK(!mults.empty() && mults.size() <= 8, "[sr config] ", src, ": mults must list 1 to 8 levels, got ",
           mults.size());
  for (int64_t m : mults) positive(m, "each of mults");
  for (int64_t l = 0; l < levels(); ++l) {
    const int64_t ch = level_channels(l);
    GP_CHECK(ch % groups == 0, "[sr config] ", src, ": level ", l, "'s ", ch,
             " channels do not split into ", groups, " groups");
    GP_CHECK(!(has_attention(l) || l == levels() - 1) || ch % head_channels == 0, "[sr config] ", src,
             ": level ", l, "'s ", ch, " channels do not split into heads of ", head_channels);
  }
  for (int64_t l : attention_levels)
    GP_CHECK(l >= 0 && l < levels(), "[sr config] ", src, ": attention level ", l, " outside 0 .. ",
             levels() - 1);
  GP_CHECK(norm_eps > 0, "[sr config] ", src, ": norm_eps must be positive");
  GP_CHECK(prediction == "v" || prediction == "eps", "[sr config] ", src, ": prediction '", prediction,
           "' (expected v or eps)");
  GP_CHECK(schedule == "cosine" || schedule == "linear", "[sr config] ", src, ": schedule '", schedule,
           "' (expected cosine or linear)");
  GP_CHECK(transform == "linear" || transform == "log", "[sr config] ", src, ": transform '", transform,
           "' (expected linear or log)");
  GP_CHECK(residual_std > 0, "[sr config] ", src, ": residual_std must be positive");
}

UNetConfig unet_config_from_json(const Json& j, const std::string& src) {
  GP_CHECK(j.is_object(), "[sr config] ", src, ": expected a JSON object, got ", j.type_name());
  if (const Json* a = j.find("architectures")) {
    GP_CHECK(a->is_array() && a->as_array().size() == 1 && a->as_array()[0].is_string() &&
                 a->as_array()[0].as_string() == kUNetArchitecture,
             "[sr config] ", src, ": architectures must be [\"", kUNetArchitecture, "\"]");
  }
  UNetConfig c;
  auto field = [&](const char* key, auto read) {
    const Json* v = j.find(key);
    if (!v) return;
    try {
      read(*v);
    } catch (const Error& e) {
      fail("[sr config] ", src, ": field ", key, ": ", e.what());
    }
  };
  auto integer = [&](const char* key, int64_t& out) { field(key, [&](const Json& v) { out = v.as_int(); }); };
  auto number = [&](const char* key, double& out) { field(key, [&](const Json& v) { out = v.as_number(); }); };
  auto text = [&](const char* key, std::string& out) { field(key, [&](const Json& v) { out = v.as_string(); }); };
  auto list = [&](const char* key, std::vector<int64_t>& out) {
    field(key, [&](const Json& v) {
      out.clear();
      for (const Json& e : v.as_array()) out.push_back(e.as_int());
    });
  };
  integer("channels", c.channels);
  integer("base", c.base);
  list("mults", c.mults);
  integer("res_blocks", c.res_blocks);
  list("attention_levels", c.attention_levels);
  integer("head_channels", c.head_channels);
  integer("groups", c.groups);
  number("norm_eps", c.norm_eps);
  integer("scale", c.scale);
  text("prediction", c.prediction);
  text("schedule", c.schedule);
  integer("timesteps", c.timesteps);
  text("transform", c.transform);
  number("residual_std", c.residual_std);
  c.validate(src);
  return c;
}

Json unet_config_json(const UNetConfig& c) {
  auto ints = [](const std::vector<int64_t>& v) {
    Json a = Json::Array{};
    for (int64_t x : v) a.push_back(Json(x));
    return a;
  };
  Json j = Json::Object{};
  j["architectures"] = Json::Array{Json(kUNetArchitecture)};
  j["channels"] = c.channels;
  j["base"] = c.base;
  j["mults"] = ints(c.mults);
  j["res_blocks"] = c.res_blocks;
  j["attention_levels"] = ints(c.attention_levels);
  j["head_channels"] = c.head_channels;
  j["groups"] = c.groups;
  j["norm_eps"] = c.norm_eps;
  j["scale"] = c.scale;
  j["prediction"] = c.prediction;
  j["schedule"] = c.schedule;
  j["timesteps"] = c.timesteps;
  j["transform"] = c.transform;
  j["residual_std"] = c.residual_std;
  return j;
}

}  // namespace genperf::sr
