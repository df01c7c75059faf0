// `quantize --recipe auto` (genperf/sensitivity.h, plan_auto): read or measure the sensitivity
// map, allocate formats under the budget, and choose the windows on which the achieved KL is
// scored so that it compares with the predicted one.
#include <algorithm>

#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/sensitivity.h"

namespace genperf {

AutoPlan plan_auto(const Checkpoint& ck, const AutoPlanOptions& o) {
  AutoPlan r;
  r.proxy = o.proxy;
  SensitivityMap m;
  if (!o.sensitivity.empty()) {
    m = read_sensitivity_json(o.sensitivity);
  } else {
    GP_CHECK(!o.calib.empty(), "[quantize] --recipe auto needs a sensitivity map: give --sensitivity FILE.json "
                               "(from genperf sensitivity) or --calib FILE to measure one");
    CalibrationOptions co;
    co.ctx = o.ctx;
    co.max_tokens = o.calib_tokens;
    co.source = o.calib;
    co.progress = o.progress;
    r.ref = make_calibration(ck, o.calib, co);
    SensitivityOptions so;
    so.quant = o.quant;
    so.measure = !o.proxy;
    so.progress = o.progress;
    m = measure_sensitivity(ck, *r.ref, so);
  }
  for (const SensitivityTensor& t : m.tensors)
    GP_CHECK(ck.tensors.count(t.name) && ck.tensors.at(t.name).numel() == t.elements, "[quantize] the sensitivity map (",
             m.model, ") does not describe ", ck.source, ": tensor ", t.name, " differs or is missing");
  AllocationOptions ao;
  ao.use_proxy = o.proxy;
  if (o.latency) {
    r.latency = o.latency(m);
    ao.latency = &*r.latency;
  }
  r.plan = plan_for_budget(m, o.budget, &r.report, ao);
  r.notes = m.notes;
  r.notes.push_back("allocation: " + r.report.summary());

  if (!r.ref && !o.calib.empty() && ck.tokenizer) {
    // The map's windows: its ctx, and its token count where the text has that many.
    const std::vector<int32_t> ids = ck.tokenizer->encode(read_text_file(o.calib), false);
    CalibrationOptions co;
    co.ctx = m.ctx > 0 ? m.ctx : o.ctx;
    co.source = o.calib;
    if (int64_t(ids.size()) < co.ctx) {
      r.ref_note = cat(o.calib, " has ", ids.size(), " tokens, fewer than one window of the map's ", co.ctx);
    } else {
      co.max_tokens = m.tokens > 0 ? std::min<int64_t>(m.tokens, int64_t(ids.size())) : 0;
      if (co.max_tokens >= co.ctx || co.max_tokens == 0) {
        r.ref = std::make_unique<CalibrationReference>(ck, ids, ck.tokenizer->bos_id(), co);
        if (m.tokens > 0 && int64_t(ids.size()) < m.tokens)
          r.ref_note = cat("on ", r.ref->tokens(), " tokens of ", o.calib, ", fewer than the map's ", m.tokens);
      } else {
        r.ref_note = cat(o.calib, " has fewer tokens than one window of the map's ", co.ctx);
      }
    }
  } else if (!r.ref && !o.calib.empty()) {
    // A family without text (the SR UNet): its own data, in the map's crops (ctx their side,
    // tokens their pixels) with the default seed, as genperf sensitivity draws them.
    CalibrationOptions co;
    co.source = o.calib;
    if (m.ctx > 0 && m.tokens > 0) co.crop = m.ctx, co.crops = std::max<int64_t>(1, m.tokens / (m.ctx * m.ctx));
    r.ref = make_calibration(ck, o.calib, co);
  } else if (!r.ref) {
    r.ref_note = cat("give --calib FILE to measure it", m.calib.empty() ? "" : ", the map's calibration text was " + m.calib);
  }
  if (m.method != quant_method_name(o.quant.method)) {
    const std::string differs = cat("the map was measured with ", m.method, ", this model quantized with ",
                                    quant_method_name(o.quant.method));
    r.ref_note = r.ref_note.empty() ? differs : r.ref_note + "; " + differs;
  }
  return r;
}

}  // namespace genperf
