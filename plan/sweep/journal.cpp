// The sweep journal: a header line, run markers and point lines, merged back in index order.
#include "plan/sweep/journal.hpp"

#include <filesystem>
#include <stdexcept>

#include "plan/spec/diagnostics.hpp"

namespace paratwin {
namespace {

constexpr const char* kJournalKind = "paratwin sweep journal";
constexpr std::size_t kMaxLine = 1 << 20;  // a point's line is a few KiB

// Reads one line without its newline, at most `max` bytes; false at the end of the input. A longer line
// throws, so that a damaged file costs no more memory than a point.
bool read_line(std::istream& in, std::string& line, std::size_t max, bool& ended_by_newline) {
  line.clear();
  ended_by_newline = false;
  char chunk[1 << 14];
  for (;;) {
    in.getline(chunk, sizeof chunk);
    const auto got = std::size_t(in.gcount());
    if (in.bad()) throw std::runtime_error("cannot read the journal");
    if (in.eof()) {  // the end: a last line without a newline, or nothing
      line.append(chunk, got);
      return !line.empty();
    }
    if (!in.fail()) {  // a whole line, its newline consumed (counted in gcount)
      line.append(chunk, got - 1);
      ended_by_newline = true;
      return true;
    }
    line.append(chunk, got);  // the chunk filled up before the newline
    in.clear();
    if (line.size() > max)
      throw std::runtime_error("a line of the journal is longer than " + std::to_string(max) + " bytes");
  }
}

bool is_run_marker(const std::string& line) {
  return line.rfind("{\"run\":", 0) == 0;
}

nlohmann::json header_line(const SweepHeader& h) {
  return {{"journal", kJournalKind}, {"fingerprint", h.fingerprint}, {"points", h.total}};
}

InputError another_sweep(const std::string& file) {
  return InputError(
      Location{file},
      "cannot resume: the file holds the results of another sweep (the scenario, --set, --grid or "
      "sweep.simulate differ); give another --json file or run without --resume");
}

}  // namespace

struct JournalReader::Cursor {
  std::ifstream in;
  std::uint64_t left = 0;  // bytes of the run not read yet
  std::optional<PointResult> current;
  int last = -1;  // the index read last: a run's points rise

  void advance() {
    current.reset();
    std::string line;
    bool newline = false;
    while (left > 0 && read_line(in, line, kMaxLine, newline)) {
      left -= std::min<std::uint64_t>(left, line.size() + (newline ? 1 : 0));
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) throw std::runtime_error("a line of the journal is not JSON");
      current = point_from_json(j);
      if (current->index <= last)
        throw std::runtime_error("the points of a run of the journal are not in order");
      last = current->index;
      return;
    }
  }
};

JournalReader::JournalReader(const std::string& path, const std::vector<Run>& runs) : path_(path) {
  for (const auto& [begin, end] : runs) {
    auto c = std::make_unique<Cursor>();
    c->in.open(path, std::ios::binary);
    if (!c->in) throw std::runtime_error("cannot read the sweep journal " + path);
    c->in.seekg(std::streamoff(begin));
    c->left = end - begin;
    c->advance();
    cursors_.push_back(std::move(c));
  }
}

JournalReader::JournalReader(JournalReader&&) noexcept = default;
JournalReader::~JournalReader() = default;

std::optional<PointResult> JournalReader::next() {
  int lowest = -1;
  for (const auto& c : cursors_)
    if (c->current && (lowest < 0 || c->current->index < lowest)) lowest = c->current->index;
  if (lowest < 0) return std::nullopt;
  std::optional<PointResult> out;
  for (const auto& c : cursors_)  // later runs last: the latest result of the point wins
    if (c->current && c->current->index == lowest) {
      out = std::move(c->current);
      c->advance();
    }
  return out;
}

SweepJournal::SweepJournal(std::string path, SweepHeader header)
    : path_(std::move(path)), header_(std::move(header)) {}

SweepJournal::~SweepJournal() = default;

void SweepJournal::open_for_append() {
  out_ = std::make_unique<std::ofstream>(path_, std::ios::binary | std::ios::app);
  if (!*out_) throw std::runtime_error("cannot write the sweep journal " + path_);
}

SweepJournal SweepJournal::create(const std::string& path, const SweepHeader& header) {
  SweepJournal j(path, header);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::string line = header_line(header).dump() + "\n";
    out << line;
    if (!out) throw std::runtime_error("cannot write the sweep journal " + path);
    j.size_ = line.size();
  }
  j.open_for_append();
  return j;
}

SweepJournal SweepJournal::resume(const std::string& path, const SweepHeader& header,
                                  const std::string& results_file) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    SweepJournal j = create(path, header);
    if (results_file.empty() || !std::filesystem::exists(results_file, ec)) return j;
    // The finished results of an earlier run, as one run of the new journal.
    std::ifstream in(results_file, std::ios::binary);
    j.start_run();
    try {
      read_results(
          in,
          [&](const SweepHeader& h) {
            if (h.fingerprint != header.fingerprint || h.total != header.total)
              throw another_sweep(results_file);
          },
          [&](const PointResult& p) {
            if (p.index < 0 || p.index >= header.total)
              throw std::runtime_error("point " + std::to_string(p.index) + " is not in the sweep");
            if (p.index <= j.last_index_) throw std::runtime_error("its points are not in index order");
            j.append(p);
          });
    } catch (const InputError&) {
      std::filesystem::remove(path, ec);
      throw;
    } catch (const std::runtime_error& e) {
      std::filesystem::remove(path, ec);
      throw InputError(Location{results_file}, std::string("cannot resume: ") + e.what() +
                                                   " (was it written by paratwin sweep --json?)");
    }
    return j;
  }
  SweepJournal j(path, header);
  std::ifstream in(path, std::ios::binary);
  std::string line;
  bool newline = false;
  std::uint64_t at = 0, cut = 0;  // cut: where whole lines end
  try {
    if (!read_line(in, line, kMaxLine, newline) || !newline)
      throw std::runtime_error("it has no header line");
    const nlohmann::json head = nlohmann::json::parse(line, nullptr, false);
    if (head.is_discarded() || !head.is_object() || head.value("journal", "") != kJournalKind)
      throw std::runtime_error("its first line is not a sweep journal's");
    if (head != header_line(header)) throw another_sweep(path);
    at = cut = line.size() + 1;
    while (read_line(in, line, kMaxLine, newline)) {
      if (!newline) break;  // cut short by a kill: dropped below
      const std::uint64_t next = at + line.size() + 1;
      if (is_run_marker(line)) {
        if (!j.runs_.empty()) j.runs_.back().second = at;
        j.runs_.push_back({next, next});
      } else if (j.runs_.empty() && !line.empty()) {
        throw std::runtime_error("a point comes before the first run");
      }
      at = cut = next;
    }
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw InputError(Location{path}, std::string("cannot resume from the sweep journal: ") + e.what() +
                                         "; remove it to resume from the --json file");
  }
  if (!j.runs_.empty()) j.runs_.back().second = cut;
  in.close();
  std::filesystem::resize_file(path, cut, ec);
  if (ec) throw std::runtime_error("cannot write the sweep journal " + path + ": " + ec.message());
  j.size_ = cut;
  j.open_for_append();
  return j;
}

void SweepJournal::start_run() {
  const std::string line = nlohmann::json{{"run", runs_.size() + 1}}.dump() + "\n";
  *out_ << line << std::flush;
  if (!*out_) throw std::runtime_error("cannot write the sweep journal " + path_);
  size_ += line.size();
  runs_.push_back({size_, size_});
  last_index_ = -1;
}

void SweepJournal::append(const PointResult& point) {
  if (runs_.empty() || point.index <= last_index_)
    throw std::logic_error("sweep journal: points of a run must come in rising index order");
  const std::string line = to_json(point).dump() + "\n";
  *out_ << line << std::flush;
  if (!*out_) throw std::runtime_error("cannot write the sweep journal " + path_);
  size_ += line.size();
  runs_.back().second = size_;
  last_index_ = point.index;
}

JournalReader SweepJournal::reader() const {
  return JournalReader(path_, runs_);
}

PointSource SweepJournal::points() const {
  return [path = path_, runs = runs_](const PointVisitor& visit) {
    JournalReader reader(path, runs);
    while (auto p = reader.next()) visit(*p);
  };
}

}  // namespace paratwin
