// Catalog lookup on disk.
#include "plan/spec/catalog.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "plan/spec/doc.hpp"

namespace fs = std::filesystem;

namespace paratwin {

Catalog::Catalog(std::string root) : root_(std::move(root)) {}

const Catalog& Catalog::installed() {
  static const Catalog catalog([] {
    if (const char* home = std::getenv("PARATWIN_HOME"); home && *home) return std::string(home);
    return std::string(PARATWIN_SOURCE_DIR);
  }());
  return catalog;
}

std::string kind_name(CatalogKind kind) {
  switch (kind) {
    case CatalogKind::Model:
      return "model";
    case CatalogKind::Topology:
      return "topology";
    case CatalogKind::Scenario:
      return "scenario";
  }
  return "";
}

std::string kind_directory(CatalogKind kind) {
  switch (kind) {
    case CatalogKind::Model:
      return "models";
    case CatalogKind::Topology:
      return "topologies";
    case CatalogKind::Scenario:
      return "scenarios";
  }
  return "";
}

std::string Catalog::directory(CatalogKind kind) const {
  return (fs::path(root_) / kind_directory(kind)).string();
}

std::vector<CatalogEntry> Catalog::list(CatalogKind kind) const {
  std::vector<CatalogEntry> out;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(directory(kind), ec)) {
    if (!f.is_regular_file() || f.path().extension() != ".yaml") continue;
    CatalogEntry e{f.path().stem().string(), f.path().string(), ""};
    // Read under the same limits as every YAML input: a catalog directory may be shared.
    try {
      const DocNode doc = load_yaml_file(e.path);
      const DocNode* description = doc.is_mapping() ? doc.find("description") : nullptr;
      if (!description || !description->is_scalar())
        description = doc.is_mapping() ? doc.find("name") : nullptr;
      if (description && description->is_scalar()) e.description = description->scalar;
    } catch (const InputError&) {
      e.description = "(does not parse; see paratwin validate)";
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> Catalog::names(CatalogKind kind) const {
  std::vector<std::string> out;
  for (const auto& e : list(kind)) out.push_back(e.name);
  return out;
}

std::optional<std::string> Catalog::find(CatalogKind kind, const std::string& name) const {
  const fs::path p = fs::path(directory(kind)) / (name + ".yaml");
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return p.string();
  return std::nullopt;
}

}  // namespace paratwin
