// node_exporter textfile output (the Prometheus text exposition format):
// one home for escaping, the HELP/TYPE lines and the atomic write, shared by
// `verify-ckpt --prometheus` and `observe --prometheus`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lib/common/error.hpp"

namespace scout {

// A Prometheus label value: backslash, double quote and newline escaped.
std::string prometheus_escape(const std::string& text);

// Label name/value pairs of one sample, in order (values escaped on output).
using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

// Builds a textfile metric family by family: `family` writes the HELP and
// TYPE lines of `name` once (`type` "gauge" or "counter"), `sample` one
// line. Values print in the shortest form that reads back exactly.
class PrometheusText {
 public:
  void family(const std::string& name, const std::string& type, const std::string& help);
  void sample(const std::string& name, const PrometheusLabels& labels, double value);
  // family + one sample.
  void metric(const std::string& name, const std::string& type, const std::string& help, const PrometheusLabels& labels,
              double value) {
    family(name, type, help);
    sample(name, labels, value);
  }
  const std::string& text() const { return m_text; }

 private:
  std::string m_text;
};

// Writes `text` to `file` atomically (temporary file, fsync, rename), so the
// collector never reads half a file.
Status write_prometheus_textfile(const std::string& file, const std::string& text);

}  // namespace scout
