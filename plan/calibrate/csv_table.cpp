#include "plan/calibrate/csv_table.hpp"

#include <algorithm>

#include "plan/spec/suggest.hpp"
#include "plan/util/number_text.hpp"

namespace paratwin {

bool CsvRow::positive(const std::string& column, double most, double& value) const {
  const LineField& c = at(column);
  if (parse_field(c.text, value) && value > 0 && value <= most) return true;
  diag_.error(where(column), column + ": expected a positive number up to " + format_number("%.0f", most) +
                                 ", got '" + std::string(c.text) + "'");
  return false;
}

void for_each_csv_row(std::string_view text, const std::string& path, const std::vector<std::string>& columns,
                      Diagnostics& diag, const std::function<void(const CsvRow&)>& row) {
  std::map<std::string, size_t> index;  // header column -> position
  size_t header_columns = 0;
  for_each_line(text, [&](std::string_view line, int line_number) {
    if (line.find_first_not_of(" \t") == std::string_view::npos || line.starts_with('#')) return;
    const std::vector<LineField> cells = comma_fields(line);
    if (index.empty()) {
      header_columns = cells.size();
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string name(cells[i].text);
        if (std::find(columns.begin(), columns.end(), name) == columns.end())
          diag.error({path, line_number, cells[i].column},
                     "unknown column '" + name + "': expected the header " + join(columns, ",") +
                         did_you_mean(name, columns));
        else if (!index.emplace(name, i).second)
          diag.error({path, line_number, cells[i].column}, "column '" + name + "' a second time");
      }
      for (const std::string& column : columns)
        if (!index.contains(column))
          diag.error({path, line_number, 1},
                     "the header has no column '" + column + "': expected " + join(columns, ","));
      diag.throw_if_errors();
      return;
    }
    if (cells.size() != header_columns) {
      diag.error({path, line_number, 1}, "expected " + std::to_string(header_columns) +
                                             " comma-separated values (" + join(columns, ",") + "), got " +
                                             std::to_string(cells.size()));
      return;
    }
    row(CsvRow(path, line_number, cells, index, diag));
  });
  if (index.empty()) throw InputError(Location{path}, "empty: expected the header " + join(columns, ","));
}

}  // namespace paratwin
