#include "bench/loadgen/measure.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "absl/strings/str_format.h"

namespace bandit::loadgen {

nlohmann::ordered_json Percentiles(std::vector<float> v) {
  nlohmann::ordered_json j;
  j["count"] = v.size();
  if (v.empty()) return j;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * v.size()));
    i = std::clamp<size_t>(i, 1, v.size()) - 1;
    return static_cast<double>(v[i]);
  };
  double sum = 0;
  for (float x : v) sum += x;
  j["mean"] = sum / v.size();
  j["p50"] = q(0.50);
  j["p90"] = q(0.90);
  j["p99"] = q(0.99);
  j["p999"] = q(0.999);
  j["max"] = static_cast<double>(v.back());
  return j;
}

int64_t RssBytes(int pid) {
  if (pid <= 0) return -1;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

double CpuSecondsOf(int pid) {
  if (pid <= 0) return -1;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto rp = s.rfind(')');
  if (rp == std::string::npos) return -1;
  std::vector<std::string> fields;
  size_t pos = rp + 2;
  while (pos < s.size()) {
    size_t e = s.find(' ', pos);
    if (e == std::string::npos) e = s.size();
    fields.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  if (fields.size() < 13) return -1;  // fields[11] = utime, fields[12] = stime (after state)
  return (std::stod(fields[11]) + std::stod(fields[12])) / sysconf(_SC_CLK_TCK);
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

void Errors::Add(const grpc::Status& s, const char* what) {
  std::lock_guard<std::mutex> l(mu);
  ++count;
  if (first.size() < 5)
    first.push_back(absl::StrFormat("%s: code %d: %s", what, s.error_code(), s.error_message()));
}

void Errors::Add(const std::string& m) {
  std::lock_guard<std::mutex> l(mu);
  ++count;
  if (first.size() < 5) first.push_back(m);
}

}  // namespace bandit::loadgen
