#include "lib/common/prometheus.hpp"

#include <fmt/format.h>

#include "lib/common/file.hpp"

namespace scout {

std::string prometheus_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void PrometheusText::family(const std::string& name, const std::string& type, const std::string& help) {
  m_text += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusText::sample(const std::string& name, const PrometheusLabels& labels, double value) {
  m_text += name;
  if (!labels.empty()) {
    m_text += '{';
    for (std::size_t i = 0; i < labels.size(); ++i)
      m_text += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, prometheus_escape(labels[i].second));
    m_text += '}';
  }
  m_text += fmt::format(" {}\n", value);
}

Status write_prometheus_textfile(const std::string& file, const std::string& text) {
  return atomic_write_file(file, text);
}

}  // namespace scout
