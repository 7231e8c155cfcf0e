// Checkpoint writing, verification and loading.
#include "exec/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "plan/io/atomic_file.hpp"

namespace paratwin::exec {

namespace fs = std::filesystem;

uint64_t fnv1a64(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

namespace {

constexpr int kFormat = 1;

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// What a checkpoint's files may hold at most besides the tensors (whose sizes the model fixes).
constexpr uint64_t kMaxManifestBytes = 64 << 10;
constexpr uint64_t kMaxStateBytes = 64 << 20;  // a loss per step: millions of steps
constexpr uint64_t kMaxPlanBytes = 1 << 20;
const char* const kCheckpointFiles[] = {"weights.bin", "optimizer.bin", "state.json", "plan.yaml"};

// The size of a regular file in the checkpoint's directory, checked before it is read: no links (a
// link can point anywhere), nothing but a plain file, and no more than `most` bytes.
uint64_t checked_size(const fs::path& path, uint64_t most) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (ec || !fs::exists(status)) throw std::runtime_error(path.filename().string() + " is missing");
  if (fs::is_symlink(status))
    throw std::runtime_error(path.filename().string() + " is a link; a checkpoint holds plain files");
  if (!fs::is_regular_file(status))
    throw std::runtime_error(path.filename().string() + " is not a plain file");
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error("cannot read " + path.filename().string() + ": " + ec.message());
  if (size > most)
    throw std::runtime_error(path.filename().string() + " holds " + std::to_string(size) +
                             " bytes, more than " + std::to_string(most));
  return size;
}

// A checkpoint's JSON (MANIFEST.json, state.json) is three levels deep: deeper nesting is no checkpoint,
// and would cost memory for every level. Returns a discarded value for text that is not such JSON.
nlohmann::json parse_shallow(std::string_view text) {
  constexpr int kMostDepth = 8;
  try {
    return nlohmann::json::parse(text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > kMostDepth) throw std::runtime_error("nested too deep");
      return true;
    });
  } catch (const std::exception&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

// Reads exactly `bytes` bytes (the size checked above; a file that changed since fails).
std::string read_exactly(const fs::path& path, uint64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.filename().string() + " is missing");
  std::string out(bytes, '\0');
  in.read(out.data(), std::streamsize(bytes));
  if (uint64_t(in.gcount()) != bytes || in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(path.filename().string() + " changed while it was read");
  return out;
}

void fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::vector<float> floats(const std::string& bytes, size_t from, size_t count) {
  std::vector<float> out(count);
  std::memcpy(out.data(), bytes.data() + from * sizeof(float), count * sizeof(float));
  return out;
}

}  // namespace

std::string save_checkpoint(const std::string& dir, const TrainingState& s) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create checkpoint directory " + dir + ": " + ec.message());
  const fs::path final_path = fs::path(dir) / step_name(s.step);
  const fs::path tmp = fs::path(dir) / ("." + step_name(s.step) + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) throw std::runtime_error("cannot create " + tmp.string() + ": " + ec.message());

  const nlohmann::json state = {{"format", kFormat}, {"step", s.step},     {"data_sequence", s.data_sequence},
                                {"seed", s.seed},    {"dp", s.dp},         {"global_batch", s.global_batch},
                                {"model", s.model},  {"losses", s.losses}, {"parameters", s.weights.size()}};
  std::vector<float> optimizer = s.adam_m;
  optimizer.insert(optimizer.end(), s.adam_v.begin(), s.adam_v.end());
  const std::vector<std::pair<std::string, std::string>> files = {{"weights.bin", bytes_of(s.weights)},
                                                                  {"optimizer.bin", bytes_of(optimizer)},
                                                                  {"state.json", state.dump(1) + "\n"},
                                                                  {"plan.yaml", s.plan_yaml}};
  nlohmann::json manifest = {{"format", kFormat}, {"step", s.step}, {"files", nlohmann::json::object()}};
  for (const auto& [name, content] : files) {
    write_file_atomically((tmp / name).string(), content);  // flushed to disk before the manifest
    manifest["files"][name] = {{"bytes", content.size()},
                               {"fnv1a64", hex(fnv1a64(content.data(), content.size()))}};
  }
  // The manifest is written last: a directory without one is incomplete by construction.
  write_file_atomically((tmp / "MANIFEST.json").string(), manifest.dump(1) + "\n");
  fsync_directory(tmp);
  fs::remove_all(final_path, ec);
  fs::rename(tmp, final_path, ec);
  if (ec)
    throw std::runtime_error("cannot move checkpoint into place at " + final_path.string() + ": " +
                             ec.message());
  fsync_directory(dir);
  return final_path.string();
}

CheckpointManifest parse_checkpoint_manifest(std::string_view text, size_t expected_parameters) {
  const nlohmann::json j = parse_shallow(text);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error("MANIFEST.json is not a JSON object (incomplete write?)");
  const auto format = j.find("format");
  if (format == j.end() || !format->is_number_integer() || format->get<int64_t>() != kFormat)
    throw std::runtime_error("MANIFEST.json: format " +
                             (format == j.end() ? std::string("missing") : format->dump()) + " is not " +
                             std::to_string(kFormat));
  CheckpointManifest m;
  const auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() < 0)
    throw std::runtime_error("MANIFEST.json: 'step' is missing or not a whole number >= 0");
  m.step = step->get<int64_t>();
  const auto files = j.find("files");
  if (files == j.end() || !files->is_object())
    throw std::runtime_error("MANIFEST.json: 'files' is missing or not a mapping");
  // Exactly the files a checkpoint holds: a name with a path in it would read outside the directory.
  for (const auto& [name, entry] : files->items()) {
    if (std::find(std::begin(kCheckpointFiles), std::end(kCheckpointFiles), name) ==
        std::end(kCheckpointFiles))
      throw std::runtime_error("MANIFEST.json names '" + name + "'" +
                               (name.find('/') != std::string::npos || name.find("..") != std::string::npos
                                    ? ", a path outside the checkpoint's directory"
                                    : ", which is no file of a checkpoint") +
                               "; expected weights.bin, optimizer.bin, state.json and plan.yaml");
  }
  const uint64_t weights = uint64_t(expected_parameters) * sizeof(float);
  for (const char* name : kCheckpointFiles) {
    const auto entry = files->find(name);
    if (entry == files->end() || !entry->is_object())
      throw std::runtime_error("the manifest does not list " + std::string(name));
    const auto bytes = entry->find("bytes");
    const auto sum = entry->find("fnv1a64");
    if (bytes == entry->end() || !bytes->is_number_unsigned())
      throw std::runtime_error("MANIFEST.json: " + std::string(name) + ".bytes is missing or not a size");
    if (sum == entry->end() || !sum->is_string() || sum->get<std::string>().size() != 16 ||
        sum->get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos)
      throw std::runtime_error("MANIFEST.json: " + std::string(name) + ".fnv1a64 is not 16 hex digits");
    CheckpointManifest::File f{name, bytes->get<uint64_t>(), sum->get<std::string>()};
    // Sizes this model and the format fix: anything else is refused before a byte is read.
    const std::string n = name;
    const uint64_t expected = n == "weights.bin" ? weights : n == "optimizer.bin" ? 2 * weights : 0;
    if (expected && f.bytes != expected)
      throw std::runtime_error(n + " is " + std::to_string(f.bytes) +
                               " bytes by the manifest; this model's " + std::to_string(expected_parameters) +
                               " parameters need " + std::to_string(expected));
    const uint64_t most = n == "state.json" ? kMaxStateBytes : n == "plan.yaml" ? kMaxPlanBytes : expected;
    if (f.bytes > most)
      throw std::runtime_error(n + " is " + std::to_string(f.bytes) + " bytes by the manifest, more than " +
                               std::to_string(most));
    m.files.push_back(std::move(f));
  }
  return m;
}

TrainingState parse_checkpoint_state(std::string_view text) {
  const nlohmann::json j = parse_shallow(text);
  if (j.is_discarded() || !j.is_object()) throw std::runtime_error("state.json is not a JSON object");
  auto whole = [&](const char* key, int64_t min) {
    const auto v = j.find(key);
    if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() < min)
      throw std::runtime_error(std::string("state.json: '") + key +
                               "' is missing or not a whole number >= " + std::to_string(min));
    return v->get<int64_t>();
  };
  TrainingState s;
  s.step = whole("step", 0);
  s.data_sequence = whole("data_sequence", 0);
  const auto seed = j.find("seed");
  if (seed == j.end() || !seed->is_number_unsigned())
    throw std::runtime_error("state.json: 'seed' is missing or not a seed");
  s.seed = seed->get<uint64_t>();
  const int64_t dp = whole("dp", 1);
  if (dp > std::numeric_limits<int>::max()) throw std::runtime_error("state.json: 'dp' is out of range");
  s.dp = int(dp);
  s.global_batch = whole("global_batch", 1);
  const auto model = j.find("model");
  if (model == j.end() || !model->is_string())
    throw std::runtime_error("state.json: 'model' is missing or not text");
  s.model = model->get<std::string>();
  const auto losses = j.find("losses");
  if (losses == j.end() || !losses->is_array())
    throw std::runtime_error("state.json: 'losses' is missing or not a list");
  for (const auto& l : *losses) {
    if (!l.is_number()) throw std::runtime_error("state.json: 'losses' holds something that is not a number");
    s.losses.push_back(l.get<double>());
  }
  return s;
}

TrainingState load_checkpoint(const std::string& path, size_t expected_parameters) {
  const fs::path dir(path);
  const CheckpointManifest manifest = parse_checkpoint_manifest(
      read_exactly(dir / "MANIFEST.json", checked_size(dir / "MANIFEST.json", kMaxManifestBytes)),
      expected_parameters);
  // Every file's size against the manifest before any is read.
  for (const auto& f : manifest.files) {
    const uint64_t size = checked_size(dir / f.name, std::numeric_limits<uint64_t>::max());
    if (size != f.bytes)
      throw std::runtime_error(f.name +
                               (size < f.bytes ? " is truncated: " : " is larger than its manifest says: ") +
                               std::to_string(size) + " bytes, the manifest says " + std::to_string(f.bytes));
  }
  std::map<std::string, std::string> content;
  for (const auto& f : manifest.files) {
    std::string bytes = read_exactly(dir / f.name, f.bytes);
    const std::string sum = hex(fnv1a64(bytes.data(), bytes.size()));
    if (sum != f.fnv1a64)
      throw std::runtime_error(f.name + " is corrupt: checksum " + sum + ", the manifest says " + f.fnv1a64);
    content[f.name] = std::move(bytes);
  }
  TrainingState s = parse_checkpoint_state(content["state.json"]);
  if (s.step != manifest.step)
    throw std::runtime_error("state.json is of step " + std::to_string(s.step) + ", the manifest of step " +
                             std::to_string(manifest.step));
  s.plan_yaml = std::move(content["plan.yaml"]);
  const size_t n = expected_parameters;
  s.weights = floats(content["weights.bin"], 0, n);
  s.adam_m = floats(content["optimizer.bin"], 0, n);
  s.adam_v = floats(content["optimizer.bin"], n, n);
  return s;
}

std::optional<TrainingState> peek_latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::vector<fs::path> candidates;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step-", 0) == 0) candidates.push_back(entry.path());
  }
  std::sort(candidates.rbegin(), candidates.rend());
  for (const auto& c : candidates) {
    try {
      const std::string manifest =
          read_exactly(c / "MANIFEST.json", checked_size(c / "MANIFEST.json", kMaxManifestBytes));
      const nlohmann::json j = parse_shallow(manifest);
      const auto state = j.is_object() ? j.find("files") : j.end();
      if (state == j.end() || !state->is_object() || !state->contains("state.json")) continue;
      return parse_checkpoint_state(
          read_exactly(c / "state.json", checked_size(c / "state.json", kMaxStateBytes)));
    } catch (const std::runtime_error&) {
      // unreadable: the ranks' own search skips it too
    }
  }
  return std::nullopt;
}

CheckpointSearch load_latest_checkpoint(const std::string& dir, size_t expected_parameters) {
  CheckpointSearch out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  std::vector<fs::path> candidates;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step-", 0) == 0) candidates.push_back(entry.path());
  }
  std::sort(candidates.rbegin(), candidates.rend());  // newest first: names are zero-padded steps
  for (const auto& c : candidates) {
    try {
      out.state = load_checkpoint(c.string(), expected_parameters);
      out.path = c.string();
      return out;
    } catch (const std::exception& e) {
      out.rejected.push_back(c.string() + ": " + e.what());
    }
  }
  return out;
}

int remove_unfinished_checkpoints(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  std::vector<fs::path>
      leftovers;  // ".step-N.tmp-PID" of save_checkpoint, ".NAME.tmpXXXXXX" of atomic writes
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".", 0) == 0 && name.find(".tmp") != std::string::npos) leftovers.push_back(entry.path());
  }
  for (const auto& p : leftovers) removed += fs::remove_all(p, ec) > 0 ? 1 : 0;
  return removed;
}

}  // namespace paratwin::exec
