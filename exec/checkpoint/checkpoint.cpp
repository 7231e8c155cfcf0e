// Checkpoint writing, verification and loading.
#include "exec/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
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

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.filename().string() + " is missing");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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

TrainingState load_checkpoint(const std::string& path, size_t expected_parameters) {
  const fs::path dir(path);
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_all(dir / "MANIFEST.json"));
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error("MANIFEST.json is not valid JSON (incomplete write?)");
  }
  if (manifest.value("format", 0) != kFormat)
    throw std::runtime_error("format " + std::to_string(manifest.value("format", 0)) + " is not " +
                             std::to_string(kFormat));
  std::map<std::string, std::string> content;
  for (const char* name : {"weights.bin", "optimizer.bin", "state.json", "plan.yaml"}) {
    if (!manifest["files"].contains(name))
      throw std::runtime_error("the manifest does not list " + std::string(name));
    const auto& entry = manifest["files"][name];
    std::string bytes = read_all(dir / name);
    const size_t expected = entry.at("bytes").get<size_t>();
    if (bytes.size() != expected)
      throw std::runtime_error(std::string(name) + " is truncated: " + std::to_string(bytes.size()) +
                               " bytes, the manifest says " + std::to_string(expected));
    const std::string sum = hex(fnv1a64(bytes.data(), bytes.size()));
    if (sum != entry.at("fnv1a64").get<std::string>())
      throw std::runtime_error(std::string(name) + " is corrupt: checksum " + sum + ", the manifest says " +
                               entry.at("fnv1a64").get<std::string>());
    content[name] = std::move(bytes);
  }
  const nlohmann::json state = nlohmann::json::parse(content["state.json"]);
  TrainingState s;
  s.step = state.at("step");
  s.data_sequence = state.at("data_sequence");
  s.seed = state.at("seed");
  s.dp = state.at("dp");
  s.global_batch = state.at("global_batch");
  s.model = state.at("model");
  s.losses = state.at("losses").get<std::vector<double>>();
  s.plan_yaml = content["plan.yaml"];
  const size_t n = content["weights.bin"].size() / sizeof(float);
  if (n != expected_parameters)
    throw std::runtime_error("holds " + std::to_string(n) + " parameters; this model has " +
                             std::to_string(expected_parameters));
  if (content["optimizer.bin"].size() != 2 * n * sizeof(float))
    throw std::runtime_error("optimizer.bin does not hold two moments per parameter");
  s.weights = floats(content["weights.bin"], 0, n);
  s.adam_m = floats(content["optimizer.bin"], 0, n);
  s.adam_v = floats(content["optimizer.bin"], n, n);
  return s;
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
