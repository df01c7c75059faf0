// genperf report: the results store of the study as one self-contained HTML page (charts and
// tables, the charting library inlined) and a Markdown summary with the same tables.
#include <cstdio>
#include <filesystem>
#include <string>

#include "common.h"
#include "genperf/error.h"
#include "genperf/study_report.h"

namespace genperf::cli {
namespace {

namespace fs = std::filesystem;

// tools/report/node_modules of the checkout this binary was built in: the first one found going up
// from the binary's folder (build/genperf finds the repository's). When there is none, the one
// beside build/, which read_report_assets then names as missing.
std::string default_assets() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.parent_path(); dir = dir.parent_path())
    if (fs::is_directory(dir / "tools/report/node_modules", ec)) return (dir / "tools/report/node_modules").string();
  return (exe.parent_path().parent_path() / "tools/report/node_modules").string();
}

}  // namespace

int cmd_report(int argc, char** argv) {
  Args a("report",
         {{"db", "the results store (an SQLite file written by genperf study)"},
          {"out", "the HTML report: one file, no network needed", "report.html"},
          {"md", "the Markdown summary (default: the HTML's name with .md)", "", false, true},
          {"assets", "the node_modules holding vega, vega-lite and vega-embed (default: tools/report/node_modules)", "",
           false, true}},
         argc, argv, 2);
  if (run_help(a)) return 0;
  const std::string out = a.str("out");
  const std::string md = a.has("md") ? a.str("md") : fs::path(out).replace_extension(".md").string();
  GP_CHECK(md != out, "[report] --md names the HTML file itself: ", md);
  for (const std::string& f : {out, md})  // their directories, as the other verbs' --out
    if (fs::path(f).has_parent_path()) fs::create_directories(fs::path(f).parent_path());
  const StudyReport r = write_study_report(a.str("db"), a.has("assets") ? a.str("assets") : default_assets(), out, md);
  std::printf("wrote %s (%d charts) and %s\n", out.c_str(), r.charts, md.c_str());
  return 0;
}

}  // namespace genperf::cli
