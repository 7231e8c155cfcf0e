// Timeline geometry and level of detail.
#include "gui/model/timeline_layout.hpp"

#include <algorithm>
#include <array>

namespace paratwin::gui {

TimelineLayout::TimelineLayout(TimelineMetrics metrics) : metrics_(metrics) {}

void TimelineLayout::set_sections(std::vector<TimelineSection> sections) {
  sections_ = std::move(sections);
  rows_.clear();
  headers_.clear();
  begin_ = end_ = 0;
  double y = metrics_.ruler;
  for (size_t s = 0; s < sections_.size(); ++s) {
    const Trace& trace = *sections_[s].trace;
    headers_.push_back({int(s), y});
    y += metrics_.section_header;
    QString previous;
    for (size_t l = 0; l < trace.lanes.size(); ++l) {
      const Lane& lane = trace.lanes[l];
      rows_.push_back({int(s), int(l), y, metrics_.lane, lane.process == previous ? QString() : lane.process,
                       lane.thread});
      previous = lane.process;
      y += metrics_.lane;
    }
    begin_ = std::min(begin_, trace.begin_s + offset(int(s)));
    end_ = std::max(end_, trace.end_s + offset(int(s)));
  }
  height_ = y + 4;
}

size_t TimelineLayout::task_count() const {
  size_t n = 0;
  for (const auto& s : sections_) n += s.trace->task_count;
  return n;
}

double TimelineLayout::offset(int section) const {
  const TimelineSection& s = sections_[size_t(section)];
  return s.offset_s.value_or(-s.trace->begin_s);
}

const Lane& TimelineLayout::lane(const TimelineRow& row) const {
  return sections_[row.section].trace->lanes[row.lane];
}

const Span& TimelineLayout::span(const TimelineRow& row, int index) const {
  return lane(row).spans[index];
}

std::vector<TimelineItem> TimelineLayout::items(const TimelineRow& row, const TimeAxis& axis) const {
  std::vector<TimelineItem> out;
  const Lane& ln = lane(row);
  const double off = offset(row.section);
  const double t0 = axis.begin() - off, t1 = axis.end() - off;
  const double left = axis.left(), right = axis.left() + axis.width();
  const double top = row.top + 2, height = row.height - 4;
  const double min_px = metrics_.min_item_px;

  // A bucket of spans too narrow to draw one by one.
  double bx0 = 0, bx1 = 0;
  int count = 0, last = -1;
  std::array<double, kSpanKinds> weight{};
  auto flush = [&] {
    if (count == 0) return;
    const int kind = int(std::max_element(weight.begin(), weight.end()) - weight.begin());
    out.push_back(
        {QRectF(bx0, top, std::max(bx1 - bx0, 1.0), height), SpanKind(kind), count == 1 ? last : -1, count});
    count = 0;
    weight.fill(0);
  };

  // The first span that may reach into the view: max_end_prefix is non-decreasing.
  auto first = std::lower_bound(ln.max_end_prefix.begin(), ln.max_end_prefix.end(), t0);
  for (size_t i = size_t(first - ln.max_end_prefix.begin()); i < ln.spans.size(); ++i) {
    const Span& s = ln.spans[i];
    if (s.start_s >= t1) break;
    if (s.end_s <= t0) continue;
    const double x0 = std::max(left, axis.x(s.start_s + off)), x1 = std::min(right, axis.x(s.end_s + off));
    if (x1 - x0 >= min_px) {
      flush();
      out.push_back({QRectF(x0, top, x1 - x0, height), s.kind, int(i), 1});
      continue;
    }
    if (count > 0 && (x0 > bx1 + 1 || x1 - bx0 > min_px)) flush();
    if (count == 0) bx0 = x0, bx1 = x1;
    bx1 = std::max(bx1, x1);
    weight[int(s.kind)] += std::max(s.end_s - s.start_s, 1e-15);
    last = int(i);
    ++count;
  }
  flush();
  return out;
}

std::optional<TimelineHit> TimelineLayout::hit(double x, double y, const TimeAxis& axis) const {
  for (size_t r = 0; r < rows_.size(); ++r) {
    const TimelineRow& row = rows_[r];
    if (y < row.top || y >= row.top + row.height) continue;
    const Lane& ln = lane(row);
    const double off = offset(row.section);
    const double t = axis.t(x) - off, slack = 3 * axis.seconds_per_pixel();
    // Among spans within the slack, the one containing t, else the nearest; tasks before idle gaps.
    std::optional<TimelineHit> best;
    double best_distance = slack;
    auto first = std::lower_bound(ln.max_end_prefix.begin(), ln.max_end_prefix.end(), t - slack);
    for (size_t i = size_t(first - ln.max_end_prefix.begin()); i < ln.spans.size(); ++i) {
      const Span& s = ln.spans[i];
      if (s.start_s > t + slack) break;
      const double distance = t < s.start_s ? s.start_s - t : t > s.end_s ? t - s.end_s : 0;
      const bool better = distance < best_distance ||
                          (distance == best_distance && best &&
                           span(row, best->span).kind == SpanKind::Idle && s.kind != SpanKind::Idle);
      if (better || (!best && distance <= slack)) {
        best = TimelineHit{int(r), int(i)};
        best_distance = distance;
      }
    }
    return best;
  }
  return std::nullopt;
}

QString describe_span(const Span& s, double offset_s) {
  const double d = s.end_s - s.start_s;
  QString text = QString("%1 — %2\nstart %3, duration %4")
                     .arg(s.name, span_kind_label(s.kind), format_time(s.start_s + offset_s, d / 100),
                          format_time(d, d / 100));
  if (!s.details.isEmpty()) text += "\n" + s.details;
  return text;
}

}  // namespace paratwin::gui
