// The sensitivity map's files: CSV (one row per entry), JSON (read back by quant's
// read_sensitivity_json, so its keys change only with the reader's) and the SVG heatmap.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/report.h"
#include "report/markup.h"

namespace genperf {
namespace {

std::string num(double x) {
  if (!std::isfinite(x)) return "";
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}

Json jnum(double x) { return std::isfinite(x) ? Json(x) : Json(); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

// Viridis at 9 evenly spaced points (the colormap's published values, rounded to hex).
const char* const kViridis[] = {"#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c",
                                "#28ae80", "#5ec962", "#addc30", "#fde725"};

std::string color_at(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double x = t * 8;
  const int i = std::min(7, int(x));
  const double f = x - i;
  auto hex = [](const char* s, int k) { return std::stoi(std::string(s + 1 + 2 * k, 2), nullptr, 16); };
  char b[8];
  std::snprintf(b, sizeof b, "#%02x%02x%02x", int(std::lround(hex(kViridis[i], 0) * (1 - f) + hex(kViridis[i + 1], 0) * f)),
                int(std::lround(hex(kViridis[i], 1) * (1 - f) + hex(kViridis[i + 1], 1) * f)),
                int(std::lround(hex(kViridis[i], 2) * (1 - f) + hex(kViridis[i + 1], 2) * f)));
  return b;
}

}  // namespace

std::string sensitivity_csv(const SensitivityMap& m) {
  std::map<std::string, const SensitivityTensor*> info;
  for (const auto& t : m.tensors) info[t.name] = &t;
  std::string s = "tensor,layer,kind,format,bpw,bytes,kl,dloss,proxy,measured\n";
  for (const auto& e : m.entries) {
    const SensitivityTensor* t = info.at(e.tensor);
    s += cat(csv_field(e.tensor), ",", t->layer, ",", t->kind, ",", dtype_name(e.format), ",", num(e.bpw), ",", e.bytes,
             ",", num(e.kl), ",", num(e.dloss), ",", num(e.proxy), ",", e.measured ? 1 : 0, "\n");
  }
  return s;
}

std::string sensitivity_json(const SensitivityMap& m) {
  Json::Array formats, tensors, entries, notes;
  for (DType f : m.formats) formats.push_back(dtype_name(f));
  std::map<std::string, const SensitivityTensor*> info;
  for (const auto& t : m.tensors) {
    info[t.name] = &t;
    tensors.push_back(Json::Object{{"name", t.name}, {"layer", int64_t(t.layer)}, {"kind", t.kind},
                                   {"elements", t.elements}, {"source_dtype", dtype_name(t.source_dtype)},
                                   {"source_bytes", t.source_bytes}});
  }
  for (const auto& e : m.entries) {
    const SensitivityTensor* t = info.at(e.tensor);
    entries.push_back(Json::Object{{"tensor", e.tensor}, {"layer", int64_t(t->layer)}, {"kind", t->kind},
                                   {"format", dtype_name(e.format)}, {"bpw", e.bpw}, {"bytes", e.bytes},
                                   {"kl", jnum(e.kl)}, {"dloss", jnum(e.dloss)}, {"proxy", jnum(e.proxy)},
                                   {"measured", e.measured}});
  }
  for (const auto& n : m.notes) notes.push_back(n);
  Json::Object by;
  for (const auto& [f, r] : m.spearman_by_format) by.emplace_back(f, jnum(r));
  Json j = Json::Object{
      {"kind", "genperf-sensitivity"},
      {"version", 1},
      {"model", m.model},
      {"calib", m.calib},
      {"method", m.method},
      {"metric", m.metric},
      {"ctx", m.ctx},
      {"tokens", m.tokens},
      {"reference_nll", m.reference_nll},
      {"reference_ppl", std::exp(m.reference_nll)},
      {"formats", Json(std::move(formats))},
      {"measured", m.measured},
      {"anchor", m.anchor},
      {"total_source_bytes", m.total_source_bytes},
      {"quantizable_elements", m.quantizable_elements()},
      {"correlation", Json::Object{{"measure", "spearman(proxy, kl)"}, {"all", jnum(m.spearman)}, {"by_format", Json(std::move(by))}}},
      {"seconds", m.seconds},
      {"notes", Json(std::move(notes))},
      {"tensors", Json(std::move(tensors))},
      {"entries", Json(std::move(entries))}};
  if (m.metric != "kl") {  // a perplexity only for token losses
    Json::Object& o = j.as_object();
    o.erase(std::remove_if(o.begin(), o.end(), [](const auto& kv) { return kv.first == "reference_ppl"; }), o.end());
  }
  return j.dump(1) + "\n";
}

std::string sensitivity_svg(const SensitivityMap& m) {
  // One panel per format: rows are layers (blocks), then one row for the tensors outside them
  // (the embedding and the head; an SR UNet's time MLP, first and last convolutions); columns
  // the kinds of the blocks' matrices in forward order. Color: log10 of the measured divergence
  // (the proxy when the map has no measurement), one scale for all panels.
  std::vector<std::string> kinds;  // of the blocks' tensors, in order of first appearance
  std::vector<const SensitivityTensor*> outside;
  int layers = 0;
  for (const auto& t : m.tensors) {
    layers = std::max(layers, t.layer + 1);
    if (t.layer < 0) outside.push_back(&t);
    else if (std::find(kinds.begin(), kinds.end(), t.kind) == kinds.end()) kinds.push_back(t.kind);
  }
  const int ncol = std::max<int>(1, int(kinds.size()));
  const bool use_kl = m.measured;
  const bool kl = m.metric == "kl";
  const std::string what = !use_kl ? "weight error (proxy)"
                           : kl    ? "mean KL(ref || only this tensor quantized), nats/token"
                                   : cat("mean ", m.metric, " of the prediction (only this tensor quantized)");
  std::map<std::pair<std::string, std::string>, double> val;  // (format, tensor) -> value
  std::set<std::pair<std::string, std::string>> estimated;     // anchored maps: not measured
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& e : m.entries) {
    const double v = use_kl ? e.kl : e.proxy;
    val[{dtype_name(e.format), e.tensor}] = v;
    if (use_kl && !e.measured) estimated.insert({dtype_name(e.format), e.tensor});
    if (std::isfinite(v) && v > 0) lo = std::min(lo, std::log10(v)), hi = std::max(hi, std::log10(v));
  }
  if (!(lo <= hi)) lo = -6, hi = 0;
  lo = std::floor(lo);
  hi = std::max(std::ceil(hi), lo + 1);
  auto t_of = [&](double v) { return v > 0 && std::isfinite(v) ? (std::log10(v) - lo) / (hi - lo) : 0.0; };

  const int cw = 54, ch = 20, label_w = 56, head_h = 36, gap = 24;
  const int rows = layers + (outside.empty() ? 0 : 1);
  const int pw = label_w + ncol * cw, ph = head_h + rows * ch + 10;
  const int per_row = std::min<int>(4, int(m.formats.size()));
  const int prow = (int(m.formats.size()) + per_row - 1) / std::max(per_row, 1);
  const int top = 62, legend_w = 90, lh = 200;
  const std::string title = cat("Sensitivity of ", m.model, ": ", what,
                                m.anchor.empty() ? "" : cat(" (measured at ", m.anchor, ", other formats estimated by the proxy)"));
  char sub[512];
  const std::string rho = std::isfinite(m.spearman) ? num(std::round(m.spearman * 1000) / 1000) : "n/a";
  if (kl)
    std::snprintf(sub, sizeof sub, "calibration %s, %lld tokens (ctx %lld), %s quantizer, reference ppl %.3f; Spearman(proxy, KL) = %s",
                  m.calib.c_str(), (long long)m.tokens, (long long)m.ctx, m.method.c_str(), std::exp(m.reference_nll),
                  rho.c_str());
  else
    std::snprintf(sub, sizeof sub, "calibration %s, %lld pixels (crops of %lld), %s quantizer, reference loss %.4g; Spearman(proxy, %s) = %s",
                  m.calib.c_str(), (long long)m.tokens, (long long)m.ctx, m.method.c_str(), m.reference_nll,
                  m.metric.c_str(), rho.c_str());
  // Wide enough for the title lines too (about 0.6 em per character).
  const int W = std::max({16 + per_row * (pw + gap) + legend_w, 32 + int(title.size()) * 9, 32 + int(std::strlen(sub)) * 7});
  const int H = std::max(top + prow * (ph + gap) + 10, top + 16 + lh + 40);

  std::string s = cat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", W, "\" height=\"", H, "\" viewBox=\"0 0 ", W, " ",
                      H, "\" font-family=\"Helvetica, Arial, sans-serif\">\n");
  s += cat("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  s += cat("<text x=\"16\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", report::xml_text(title), "</text>\n");
  s += cat("<text x=\"16\" y=\"42\" font-size=\"12\" fill=\"#333\">", report::xml_text(sub), "</text>\n");

  auto cell = [&](int x, int y, int w, const std::string& fmt, const std::string& tensor, const std::string& label) {
    auto it = val.find({fmt, tensor});
    if (it == val.end()) {
      s += cat("<rect x=\"", x, "\" y=\"", y, "\" width=\"", w - 1, "\" height=\"", ch - 1,
               "\" fill=\"#e6e6e6\"><title>", report::xml_text(tensor), " ", fmt, ": not applicable</title></rect>");
      s += cat("<text x=\"", x + w / 2, "\" y=\"", y + 14, "\" font-size=\"9\" text-anchor=\"middle\" fill=\"#888\">",
               label.empty() ? "n/a" : report::xml_text(label + " n/a"), "</text>\n");
      return;
    }
    const double t = t_of(it->second);
    char v[32];
    std::snprintf(v, sizeof v, "%s%.1e", estimated.count({fmt, tensor}) ? "~" : "", it->second);
    s += cat("<rect x=\"", x, "\" y=\"", y, "\" width=\"", w - 1, "\" height=\"", ch - 1, "\" fill=\"", color_at(t),
             "\"><title>", report::xml_text(tensor), " ", fmt, ": ", v, "</title></rect>");
    s += cat("<text x=\"", x + w / 2, "\" y=\"", y + 14, "\" font-size=\"9\" text-anchor=\"middle\" fill=\"",
             t < 0.6 ? "white" : "black", "\">", report::xml_text(label.empty() ? std::string(v) : label + " " + v), "</text>\n");
  };

  std::map<std::pair<int, std::string>, std::string> by_pos;  // (layer, kind) -> tensor
  for (const auto& t : m.tensors) by_pos[{t.layer, t.kind}] = t.name;
  for (size_t fi = 0; fi < m.formats.size(); ++fi) {
    const std::string fmt = dtype_name(m.formats[fi]);
    const int px = 16 + int(fi % size_t(per_row)) * (pw + gap), py = top + int(fi / size_t(per_row)) * (ph + gap);
    double bpw = 0;
    for (const auto& e : m.entries)
      if (e.format == m.formats[fi]) { bpw = e.bpw; break; }
    char title[96];
    std::snprintf(title, sizeof title, "%s (%.3g bpw)", fmt.c_str(), bpw);
    s += cat("<g><text x=\"", px, "\" y=\"", py + 12, "\" font-size=\"13\" font-weight=\"bold\">", title, "</text>\n");
    for (int c = 0; c < ncol; ++c)
      s += cat("<text x=\"", px + label_w + c * cw + cw / 2, "\" y=\"", py + head_h - 6,
               "\" font-size=\"11\" text-anchor=\"middle\">", report::xml_text(kinds[size_t(c)]), "</text>");
    s += "\n";
    for (int l = 0; l < layers; ++l) {
      const int y = py + head_h + l * ch;
      s += cat("<text x=\"", px + label_w - 6, "\" y=\"", y + 14, "\" font-size=\"11\" text-anchor=\"end\">layer ", l,
               "</text>");
      for (int c = 0; c < ncol; ++c) {
        auto it = by_pos.find({l, kinds[size_t(c)]});
        const int x = px + label_w + c * cw;
        if (it == by_pos.end()) continue;
        cell(x, y, cw, fmt, it->second, "");
      }
    }
    if (!outside.empty()) {
      // Side by side under the blocks, each as wide as the row allows.
      const int y = py + head_h + layers * ch + 4, w = ncol * cw / int(outside.size());
      s += cat("<text x=\"", px + label_w - 6, "\" y=\"", y + 14, "\" font-size=\"11\" text-anchor=\"end\">other</text>");
      for (size_t i = 0; i < outside.size(); ++i)
        cell(px + label_w + int(i) * w, y, w, fmt, outside[i]->name, outside[i]->kind);
    }
    s += "</g>\n";
  }

  // Legend: the color scale, one tick per decade.
  const int lx = W - legend_w + 10, ly = top + 16;
  s += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int i = 0; i <= 8; ++i) s += cat("<stop offset=\"", i / 8.0, "\" stop-color=\"", kViridis[i], "\"/>");
  s += "</linearGradient></defs>\n";
  s += cat("<text x=\"", lx, "\" y=\"", ly - 6, "\" font-size=\"11\">", !use_kl ? "proxy" : kl ? "KL" : m.metric.c_str(), " (log)</text>\n");
  s += cat("<rect x=\"", lx, "\" y=\"", ly, "\" width=\"16\" height=\"", lh, "\" fill=\"url(#scale)\" stroke=\"#555\"/>\n");
  for (int d = int(lo); d <= int(hi); ++d) {
    const double y = ly + lh * (1 - (d - lo) / (hi - lo));
    s += cat("<line x1=\"", lx + 16, "\" y1=\"", y, "\" x2=\"", lx + 21, "\" y2=\"", y, "\" stroke=\"#555\"/>");
    s += cat("<text x=\"", lx + 24, "\" y=\"", y + 4, "\" font-size=\"10\">1e", d, "</text>\n");
  }
  s += cat("<rect x=\"", lx, "\" y=\"", ly + lh + 10, "\" width=\"16\" height=\"12\" fill=\"#e6e6e6\"/>");
  s += cat("<text x=\"", lx + 20, "\" y=\"", ly + lh + 20, "\" font-size=\"10\">n/a</text>\n");
  s += "</svg>\n";
  return s;
}

void write_sensitivity(const SensitivityMap& m, const std::string& prefix) {
  // Every file is rendered before any is written, and each is written atomically.
  const std::string csv = sensitivity_csv(m), json = sensitivity_json(m), svg = sensitivity_svg(m);
  write_file_atomic(prefix + ".csv", csv);
  write_file_atomic(prefix + ".json", json);
  write_file_atomic(prefix + ".svg", svg);
}

}  // namespace genperf
