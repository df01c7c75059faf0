// The comparative study's report (docs/STUDY.md, "Report"): the figures of a results store as one
// HTML page that needs no network (Vega-Lite charts, the charting library inlined) and a Markdown
// summary with the same tables. A figure of one configuration measured by several runs is pooled
// over their samples; throughput is derived from times (work / median seconds, its whiskers from
// the slowest and the fastest repetition); modeled figures are drawn hollow and dashed and
// labelled *modeled*, never compared with measured ones.
#pragma once
#include <string>
#include <vector>

#include "genperf/study_store.h"

namespace genperf {

// The minified bundles the page inlines (vega, vega-lite, vega-embed), as npm installs them.
struct ReportAssets {
  std::string vega, vega_lite, vega_embed;
};
// Reads vega/build/vega.min.js, vega-lite/build/vega-lite.min.js and
// vega-embed/build/vega-embed.min.js under `node_modules`; a missing file is an error naming it
// and saying that scripts/deps.sh installs them.
ReportAssets read_report_assets(const std::string& node_modules);

struct StudyReport {
  std::string html, markdown;
  int charts = 0;  // charts drawn (sections without data have none); the browser test counts them
};

// `source` (the store's file name) goes into the title.
StudyReport study_report(const std::vector<MetricRow>& rows, const ReportAssets& assets, const std::string& source);

// Reads the store at `db` (which must exist and be a store: errors name it), then the assets under
// `node_modules` (read_report_assets), renders both files, and only then writes each atomically.
StudyReport write_study_report(const std::string& db, const std::string& node_modules, const std::string& html_path,
                               const std::string& md_path);

}  // namespace genperf
