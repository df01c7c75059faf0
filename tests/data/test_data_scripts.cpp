// The data scripts (scripts/data/): the held-out evaluation sets built from a synthetic novel
// written here (seeded, printed), the capitals sets from Debian's kgeography-data and miscfiles
// when installed, and the Austen text when r-cran-janeaustenr is. Outputs are read back with
// genperf's own MC reader, so a format drift between the scripts and `genperf eval mc` fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "common/test_util.h"
#include "genperf/eval.h"
#include "genperf/fileio.h"
#include "genperf/json.h"

using namespace genperf;
using genperf::testing::run_command;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kScripts = std::string(GENPERF_TEST_DIR) + "/../scripts/data";
const std::string kPython = GENPERF_PYTHON;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// A novel-like text, one paragraph a line: chapter headings, sentences of 4 to 24 words (mostly
// short, as in real prose, so that a length cue would show) ending in
// . ! or ?, some quoted, some naming "Mr. Smith" or "Mrs. Jones" (abbreviations that must not end
// a sentence: "Smith" and "Jones" appear nowhere else).
std::string synthetic_novel(uint64_t seed, int paragraphs) {
  uint64_t s = seed;
  auto next = [&s](uint64_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (s >> 33) % n;
  };
  static const char* words[] = {"anne", "walked", "along", "the", "shore", "with", "captain", "her",
                                "sister", "house", "letter", "morning", "evening", "quietly", "said",
                                "never", "always", "garden", "road", "rain", "friend", "cousin", "bath",
                                "party", "music", "news", "heart", "word", "look", "hope", "again",
                                "very", "much", "pleased", "but", "and", "when", "for", "from", "town"};
  std::string text;
  for (int p = 0; p < paragraphs; ++p) {
    if (p % 25 == 0) text += "Chapter " + std::to_string(p / 25 + 1) + "\n";
    const int sentences = 2 + int(next(6));
    for (int i = 0; i < sentences; ++i) {
      std::string sent;
      const int n = 4 + int(next(21) * next(21) / 20);  // skewed to short, as real sentences are
      for (int w = 0; w < n; ++w) {
        std::string word = words[next(std::size(words))];
        if (w == 0) word[0] = char(word[0] - 'a' + 'A');
        sent += (w ? " " : "") + word;
        if (w == n / 2 && next(4) == 0) sent += next(2) ? " Mr. Smith" : " Mrs. Jones";
      }
      sent += ".!?"[next(8) == 0 ? 1 + next(2) : 0];
      if (next(5) == 0) sent = "\"" + sent + "\"";
      text += (i ? " " : "") + sent;
    }
    text += "\n";
  }
  return text;
}

int run_evalsets(const std::string& heldout, const std::string& out, int seed, std::string* log,
                 const std::string& extra = "") {
  return run_command(kPython + " " + kScripts + "/evalsets.py --heldout " + heldout + " --out " + out +
                         " --seed " + std::to_string(seed) + " " + extra + " 2>&1",
                     log);
}

}  // namespace

TEST(Evalsets, ContinuationTasksAreWellFormed) {
  const uint64_t seed = 20240611;
  SCOPED_TRACE("synthetic novel seed " + std::to_string(seed));
  TempDir tmp("evalsets");
  const std::string novel = synthetic_novel(seed, 300);
  write_file_atomic(tmp / "heldout.txt", novel);
  std::string log;
  ASSERT_EQ(run_evalsets(tmp / "heldout.txt", tmp / "out", 1, &log, "--tasks 60"), 0) << log;
  EXPECT_NE(log.find("seed 1"), std::string::npos) << log;

  // The perplexity text is the leading paragraphs, verbatim; the MC tasks come from the rest.
  const std::string ppl = read_text_file(tmp / "out/heldout_ppl.txt");
  ASSERT_FALSE(ppl.empty());
  EXPECT_TRUE(starts_with(novel, ppl));
  const std::string rest = novel.substr(ppl.size());
  const auto ppl_lines = lines_of(ppl), all_lines = lines_of(novel);
  EXPECT_NEAR(double(ppl_lines.size()), 0.4 * double(all_lines.size()), 1.0);

  // Every line is a JSON object with exactly the three keys genperf reads.
  const std::string mc_path = tmp / "out/heldout_mc.jsonl";
  for (const std::string& line : lines_of(read_text_file(mc_path))) {
    const Json j = Json::parse(line, mc_path);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j.as_object().size(), 3u) << line;
  }
  const std::vector<McTask> tasks = read_mc_tasks(mc_path);
  ASSERT_EQ(tasks.size(), 60u) << log;
  std::vector<int> gold_count(4, 0), gold_rank(4, 0);
  for (const McTask& t : tasks) {
    SCOPED_TRACE(t.context);
    ASSERT_EQ(t.choices.size(), 4u);
    ASSERT_GE(t.gold, 0);
    ASSERT_LT(t.gold, 4);
    ++gold_count[size_t(t.gold)];
    EXPECT_GE(t.context.size(), 60u);
    EXPECT_LE(t.context.size(), 400u);
    EXPECT_FALSE(ends_with(t.context, " "));
    EXPECT_FALSE(starts_with(t.context, "Smith") || starts_with(t.context, "Jones"));
    EXPECT_EQ(t.context.find("Chapter"), std::string::npos);
    // The true continuation follows the context in the held-out part, not in the perplexity part.
    const size_t at = rest.find(t.context + t.choices[size_t(t.gold)]);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(ppl.find(t.context), std::string::npos);
    const size_t para_start = rest.rfind('\n', at) + 1;  // npos + 1 == 0 for the first line
    const std::string paragraph = rest.substr(para_start, rest.find('\n', at) - para_start);
    std::set<std::string> distinct(t.choices.begin(), t.choices.end());
    EXPECT_EQ(distinct.size(), 4u);
    size_t shortest = SIZE_MAX, longest = 0;
    for (size_t c = 0; c < 4; ++c) {
      const std::string& ch = t.choices[c];
      EXPECT_TRUE(starts_with(ch, " ") && !starts_with(ch, "  ")) << ch;
      EXPECT_FALSE(ends_with(ch, " Mr.") || ends_with(ch, " Mrs.")) << ch;
      EXPECT_FALSE(starts_with(ch, " Smith") || starts_with(ch, " Jones")) << ch;
      // Every choice follows another sentence in its paragraph (a space before it, not a line
      // start): paragraph-opening sentences would give the truth a style cue.
      EXPECT_NE(novel.find(ch), std::string::npos) << "not a sentence that continues another: " << ch;
      if (int(c) != t.gold) {
        EXPECT_EQ(novel.find(t.context + ch), std::string::npos) << ch;
        EXPECT_EQ(paragraph.find(ch.substr(1)), std::string::npos)
            << "a distractor from the context's paragraph: " << ch;
      }
      shortest = std::min(shortest, ch.size() - 1);
      longest = std::max(longest, ch.size() - 1);
    }
    EXPECT_LE(double(longest), 1.5 * double(shortest) + 1e-9);
    int shorter = 0;
    for (const auto& ch : t.choices) shorter += ch.size() < t.choices[size_t(t.gold)].size();
    ++gold_rank[size_t(shorter)];
  }
  // Neither the gold's position nor its rank by length may be a cue (uniform: 15 of 60 each).
  for (int g = 0; g < 4; ++g) {
    EXPECT_GE(gold_count[size_t(g)], 8) << "gold position " << g << " is rarely used";
    EXPECT_GE(gold_rank[size_t(g)], 8) << "the gold is rarely the choice with " << g << " shorter ones";
  }
}

TEST(Evalsets, SameSeedSameOutputOtherSeedOtherTasks) {
  const uint64_t seed = 7;
  SCOPED_TRACE("synthetic novel seed 7");
  TempDir tmp("evalsets-seed");
  write_file_atomic(tmp / "heldout.txt", synthetic_novel(seed, 200));
  std::string log;
  ASSERT_EQ(run_evalsets(tmp / "heldout.txt", tmp / "a", 1, &log, "--tasks 40"), 0) << log;
  ASSERT_EQ(run_evalsets(tmp / "heldout.txt", tmp / "b", 1, &log, "--tasks 40"), 0) << log;
  ASSERT_EQ(run_evalsets(tmp / "heldout.txt", tmp / "c", 2, &log, "--tasks 40"), 0) << log;
  const std::string a = read_text_file(tmp / "a/heldout_mc.jsonl");
  EXPECT_EQ(a, read_text_file(tmp / "b/heldout_mc.jsonl"));
  EXPECT_NE(a, read_text_file(tmp / "c/heldout_mc.jsonl"));
  // The perplexity text does not depend on the seed.
  EXPECT_EQ(read_text_file(tmp / "a/heldout_ppl.txt"), read_text_file(tmp / "c/heldout_ppl.txt"));
}

// pick_distractors alone, on 2000 draws from skewed lengths (as in prose, mostly short): any two
// choices within the 1.5 length ratio, and the truth's rank by length near uniform. Drawing the
// three from a window centred on the truth would put it in the middle ranks (about 14/31/37/18%).
TEST(Evalsets, TruthLengthRankIsUniform) {
  TempDir tmp("evalsets-rank");
  write_file_atomic(tmp / "rank.py", R"(import random, sys
sys.path.insert(0, sys.argv[1])
import evalsets
rng = random.Random(1)
others = [f"{i:04d}" + "x" * int(21 + 280 * rng.random() ** 3) for i in range(1000)]
counts, worst = [0] * 4, 0.0
for _ in range(2000):
    truth = rng.choice(others)
    d = evalsets.pick_distractors(truth, [o for o in others if o != truth], rng, 1.5)
    if d is not None:
        counts[sum(len(x) < len(truth) for x in d)] += 1
        worst = max(worst, max(map(len, d + [truth])) / min(map(len, d + [truth])))
print(*counts, worst)
)");
  std::string out;
  // -B: importing the script must not leave __pycache__ in the source tree.
  ASSERT_EQ(run_command(kPython + " -B " + (tmp / "rank.py") + " " + kScripts + " 2>&1", &out), 0) << out;
  std::istringstream in(out);
  std::vector<double> counts(4);
  double worst = 0;
  in >> counts[0] >> counts[1] >> counts[2] >> counts[3] >> worst;
  ASSERT_TRUE(in) << out;
  const double total = counts[0] + counts[1] + counts[2] + counts[3];
  EXPECT_GT(total, 1500) << out;
  for (double c : counts) EXPECT_NEAR(c / total, 0.25, 0.05) << out;
  EXPECT_LE(worst, 1.5) << out;
}

TEST(Evalsets, BadInputFailsWithAMessage) {
  TempDir tmp("evalsets-bad");
  std::string log;
  EXPECT_NE(run_evalsets(tmp / "absent.txt", tmp / "out", 1, &log), 0);
  EXPECT_NE(log.find("cannot read --heldout"), std::string::npos) << log;
  // Nine paragraphs: one fewer than the least it accepts.
  write_file_atomic(tmp / "short.txt", synthetic_novel(3, 9).substr(std::string("Chapter 1\n").size()));
  EXPECT_NE(run_evalsets(tmp / "short.txt", tmp / "out", 1, &log), 0);
  EXPECT_NE(log.find("need at least 10"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(tmp / "out/heldout_mc.jsonl"));
}

TEST(Capitals, PairsTrainingAndEvaluationSets) {
  if (!fs::exists("/usr/share/kgeography/world.kgm") || !fs::exists("/usr/share/misc/countries.gz"))
    GTEST_SKIP() << "kgeography-data or miscfiles is not installed: run bash scripts/deps.sh data";
  TempDir tmp("capitals");
  std::string log;
  const std::string cmd = kPython + " " + kScripts + "/capitals.py --seed 1 --out ";
  ASSERT_EQ(run_command(cmd + (tmp / "a") + " 2>&1", &log), 0) << log;
  std::string log2;
  ASSERT_EQ(run_command(cmd + (tmp / "b") + " 2>&1", &log2), 0) << log2;

  std::map<std::string, std::string> capital;
  const auto pairs = lines_of(read_text_file(tmp / "a/capitals_pairs.tsv"));
  ASSERT_FALSE(pairs.empty());
  for (size_t i = 1; i < pairs.size(); ++i) {  // line 0 is the header
    const size_t tab = pairs[i].find('\t');
    ASSERT_NE(tab, std::string::npos) << pairs[i];
    capital[pairs[i].substr(0, tab)] = pairs[i].substr(tab + 1, pairs[i].find('\t', tab + 1) - tab - 1);
  }
  const size_t n = capital.size();
  EXPECT_GT(n, 100u) << log;
  EXPECT_EQ(capital["France"], "Paris");
  EXPECT_EQ(capital["Japan"], "Tokyo");
  EXPECT_EQ(capital["Kenya"], "Nairobi");
  EXPECT_EQ(capital.count("Bolivia"), 0u) << "a country with two capitals must be dropped";

  // Training: 4 phrasings a country, each response " Capital."
  std::set<std::string> prompts;
  const std::string train_path = tmp / "a/capitals_train.jsonl";
  const auto train = lines_of(read_text_file(train_path));
  EXPECT_EQ(train.size(), 4 * n);
  int paris = 0;
  for (const auto& line : train) {
    const Json j = Json::parse(line, train_path);
    const std::string& p = j.at("prompt").as_string();
    const std::string& r = j.at("response").as_string();
    EXPECT_TRUE(starts_with(r, " ") && ends_with(r, ".")) << r;
    prompts.insert(p);
    paris += p.find("France") != std::string::npos && r == " Paris.";
  }
  EXPECT_EQ(prompts.size(), train.size()) << "duplicate training prompts";
  EXPECT_EQ(paris, 4);

  // Evaluation: 2 phrasings a country that training never shows; the gold choice is the capital.
  const auto tasks = read_mc_tasks(tmp / "a/capitals_mc.jsonl");
  EXPECT_EQ(tasks.size(), 2 * n);
  int france = 0;
  for (const McTask& t : tasks) {
    SCOPED_TRACE(t.context);
    ASSERT_EQ(t.choices.size(), 4u);
    EXPECT_EQ(std::set<std::string>(t.choices.begin(), t.choices.end()).size(), 4u);
    EXPECT_EQ(prompts.count(t.context), 0u);
    EXPECT_FALSE(ends_with(t.context, " "));
    for (const auto& c : t.choices) EXPECT_TRUE(starts_with(c, " ")) << c;
    if (t.context.find(" France,") != std::string::npos) {
      ++france;
      EXPECT_EQ(t.choices[size_t(t.gold)], " Paris.");
    }
  }
  EXPECT_EQ(france, 2);
  for (const char* f : {"capitals_train.jsonl", "capitals_mc.jsonl", "capitals_pairs.tsv"})
    EXPECT_EQ(read_text_file(tmp / "a/" + f), read_text_file(tmp / "b/" + f))
        << f << " differs for the same seed";
}

TEST(Capitals, MissingSourcesFailWithAMessage) {
  TempDir tmp("capitals-missing");
  std::string log;
  EXPECT_NE(run_command(kPython + " " + kScripts + "/capitals.py --out " + (tmp / "out") + " --kgm-dir " +
                            (tmp / "nowhere") + " 2>&1",
                        &log),
            0);
  EXPECT_NE(log.find("deps.sh data"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(tmp / "out"));
}

TEST(Austen, OneParagraphPerLine) {
  if (!fs::exists("/usr/lib/R/site-library/janeaustenr"))
    GTEST_SKIP() << "r-cran-janeaustenr is not installed: run bash scripts/deps.sh data";
  TempDir tmp("austen");
  std::string log;
  ASSERT_EQ(run_command("bash " + kScripts + "/austen.sh " + (tmp / "out") + " 2>&1", &log), 0) << log;
  for (const char* novel :
       {"sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion"}) {
    SCOPED_TRACE(novel);
    const auto lines = lines_of(read_text_file(tmp / "out/" + std::string(novel) + ".txt"));
    ASSERT_GT(lines.size(), 500u);
    for (const auto& l : lines) {
      ASSERT_FALSE(l.empty());
      ASSERT_FALSE(starts_with(l, " ") || ends_with(l, " ")) << l;
      ASSERT_EQ(l.find("  "), std::string::npos) << l;
    }
  }
  const auto p = lines_of(read_text_file(tmp / "out/persuasion.txt"));
  EXPECT_EQ(p[4], "Chapter 1");
  EXPECT_TRUE(starts_with(p[5], "Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who, for his"));
  EXPECT_TRUE(ends_with(p[5], "the favourite volume always opened:"));  // 10 printed lines, one paragraph
}
