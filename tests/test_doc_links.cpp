// The manual's links: every relative link and image in README.md and docs/*.md points at a file
// that exists and, with a #fragment, at a heading of that file (GitHub's anchor rules). Links to
// the web are not fetched; links that leave the repository cannot be checked from a clone.
#define BOOST_TEST_MODULE doc_links
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "source_tree.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path source_dir = paratwin_test::source_dir();

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool is_fence(const std::string& line) {
  const auto first = line.find_first_not_of(' ');
  return first != std::string::npos && line.compare(first, 3, "```") == 0;
}

// GitHub's anchor of a heading: lower case, punctuation other than '-' and '_' dropped, spaces
// turned into '-'; a repeated heading gets -1, -2, ...
std::string slug_of(const std::string& heading) {
  std::string slug;
  for (const unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_')
      slug += static_cast<char>(std::tolower(c));
    else if (c == ' ')
      slug += '-';
    else if (c >= 0x80)
      slug += static_cast<char>(c);  // letters outside ASCII stay
  }
  return slug;
}

std::set<std::string> anchors_of(const fs::path& file) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool in_code = false;
  for (const auto& line : read_lines(file)) {
    if (is_fence(line)) in_code = !in_code;
    if (in_code || line.empty() || line[0] != '#') continue;
    const auto text_start = line.find_first_not_of('#');
    if (text_start == std::string::npos || line[text_start] != ' ') continue;
    const std::string slug = slug_of(line.substr(text_start + 1));
    const int n = seen[slug]++;
    anchors.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
  }
  return anchors;
}

struct Link {
  fs::path file;
  int line;
  std::string target;
};

// Inline links and images outside code; inline code spans are blanked first so that a `](` in
// code never reads as a link.
std::vector<Link> links_of(const fs::path& file) {
  static const std::regex code_span("`[^`]*`");
  static const std::regex link(R"(!?\[[^\]]*\]\(([^)\s]+)(\s+"[^"]*")?\))");
  std::vector<Link> links;
  bool in_code = false;
  int number = 0;
  for (const auto& line : read_lines(file)) {
    ++number;
    if (is_fence(line)) in_code = !in_code;
    if (in_code) continue;
    const std::string text = std::regex_replace(line, code_span, "code");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it)
      links.push_back({file, number, (*it)[1].str()});
  }
  return links;
}

std::vector<fs::path> manual_files() {
  std::vector<fs::path> files{source_dir / "README.md"};
  for (const auto& entry : fs::directory_iterator(source_dir / "docs"))
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  std::sort(files.begin() + 1, files.end());
  return files;
}

bool inside_repository(const fs::path& path) {
  const auto relative = path.lexically_normal().lexically_relative(source_dir.lexically_normal());
  return !relative.empty() && *relative.begin() != "..";
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_link_in_the_readme_and_the_docs_resolves) {
  int checked = 0;
  for (const auto& file : manual_files()) {
    for (const auto& link : links_of(file)) {
      const std::string& target = link.target;
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      const auto hash = target.find('#');
      const std::string path_part = target.substr(0, hash);
      const std::string anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
      const fs::path resolved = path_part.empty() ? file : file.parent_path() / path_part;
      if (!inside_repository(resolved)) {
        BOOST_TEST_MESSAGE(file.filename().string()
                           << ":" << link.line << ": " << target << " leaves the repository; not checked");
        continue;
      }
      ++checked;
      BOOST_CHECK_MESSAGE(fs::exists(resolved), file.lexically_relative(source_dir).string()
                                                    << ":" << link.line << ": " << target
                                                    << " points at no file");
      if (!anchor.empty() && fs::exists(resolved) && resolved.extension() == ".md")
        BOOST_CHECK_MESSAGE(anchors_of(resolved).count(anchor) == 1,
                            file.lexically_relative(source_dir).string()
                                << ":" << link.line << ": " << target << " names no heading of "
                                << resolved.lexically_relative(source_dir).string());
    }
  }
  BOOST_TEST(checked > 20);  // the README alone links every docs file
}

BOOST_AUTO_TEST_CASE(the_readme_is_a_front_door_of_under_250_lines) {
  BOOST_TEST(read_lines(source_dir / "README.md").size() < 250u);
}

BOOST_AUTO_TEST_CASE(anchors_follow_githubs_rules) {
  BOOST_TEST(slug_of("Live runs on GPUs (`--backend cuda`)") == "live-runs-on-gpus---backend-cuda");
  BOOST_TEST(slug_of("The GUI (`paratwin-gui`)") == "the-gui-paratwin-gui");
  BOOST_TEST(slug_of("The two commands") == "the-two-commands");
}
