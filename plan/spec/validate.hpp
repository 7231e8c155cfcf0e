// `paratwin validate`: tells a model, cluster or scenario file apart and checks it completely.
#pragma once

#include <string>
#include <vector>

#include "plan/spec/catalog.hpp"
#include "plan/spec/diagnostics.hpp"
#include "plan/spec/doc.hpp"

namespace paratwin {

enum class FileKind { Model, Cluster, Scenario, Plan };

struct Validation {
  FileKind kind = FileKind::Scenario;
  std::string summary;  // one line: what the file describes
  std::vector<Diagnostic> warnings;
};

// Throws InputError with every problem in the file (and in the files it references).
// Overrides apply to scenarios only.
Validation validate_file(const std::string& path, const std::vector<Override>& overrides = {},
                         const Catalog& catalog = Catalog::installed());

std::string file_kind_name(FileKind kind);

}  // namespace paratwin
