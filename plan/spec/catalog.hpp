// The YAML catalog users start from: models/, topologies/ and scenarios/ under one root.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace paratwin {

enum class CatalogKind { Model, Topology, Scenario };

struct CatalogEntry {
  std::string name;  // file name without .yaml
  std::string path;
  std::string description;  // the file's `description`, or its `name`
};

class Catalog {
 public:
  explicit Catalog(std::string root);
  // $PARATWIN_HOME if set, else the source tree this binary was built from.
  static const Catalog& installed();

  const std::string& root() const { return root_; }
  std::string directory(CatalogKind kind) const;
  // Entries sorted by name; files that fail to parse still appear, without a description.
  std::vector<CatalogEntry> list(CatalogKind kind) const;
  std::vector<std::string> names(CatalogKind kind) const;
  // The file of a catalog name, or nullopt.
  std::optional<std::string> find(CatalogKind kind, const std::string& name) const;

 private:
  std::string root_;
};

// "model", "topology", "scenario" and the plural directory names.
std::string kind_name(CatalogKind kind);
std::string kind_directory(CatalogKind kind);

}  // namespace paratwin
