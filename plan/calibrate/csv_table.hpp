// A microbenchmark's table as `paratwin calibrate` reads it from CSV: blank lines and '#' comments
// skipped, a header naming exactly the expected columns (in any order), then rows of as many cells.
// Messages name the file, line and column, and the nearest expected column.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/reader.hpp"
#include "plan/spec/suggest.hpp"
#include "plan/util/text_lines.hpp"

namespace paratwin {

// One row below the header, its cells by column name.
class CsvRow {
 public:
  CsvRow(const std::string& path, int line, const std::vector<LineField>& cells,
         const std::map<std::string, size_t>& index, Diagnostics& diag)
      : path_(path), line_(line), cells_(cells), index_(index), diag_(diag) {}

  int line() const { return line_; }
  const LineField& at(const std::string& column) const { return cells_[index_.at(column)]; }
  Location where(const std::string& column) const { return {path_, line_, at(column).column}; }
  // The cell as a number in (0, most]; false, with the error reported, when it is not one.
  bool positive(const std::string& column, double most, double& value) const;
  // The cell as one of `names`; false, with the error and the nearest name reported, when it is none.
  template <class E>
  bool choice(const std::string& column, const EnumNames<E>& names, E& value) const {
    const std::string_view text = at(column).text;
    for (const auto& [name, v] : names)
      if (text == name) return value = v, true;
    diag_.error(where(column), column + ": expected " + join(enum_choices(names)) + ", got '" +
                                   std::string(text) + "'" + did_you_mean(text, enum_choices(names)));
    return false;
  }

 private:
  const std::string& path_;
  int line_;
  const std::vector<LineField>& cells_;
  const std::map<std::string, size_t>& index_;
  Diagnostics& diag_;
};

// Calls `row` for each row of `text` (the file `path`) with the header `columns`. A wrong header is
// thrown at once (every error of it together); a row with the wrong number of cells is reported in
// `diag` and not visited. Throws when there is no header at all.
void for_each_csv_row(std::string_view text, const std::string& path, const std::vector<std::string>& columns,
                      Diagnostics& diag, const std::function<void(const CsvRow&)>& row);

}  // namespace paratwin
