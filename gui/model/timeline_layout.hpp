// Where the timeline puts things: rows (one per lane of each trace section, predicted above
// measured), the rectangles of the spans visible at the current zoom, and what lies under a point.
// Level of detail: spans narrower than a few pixels are merged into buckets of that width, coloured
// by the kind that takes most of their time, so a paint costs O(visible spans) and draws at most a
// few rectangles per pixel column however many tasks the trace has.
#pragma once

#include <QRectF>
#include <memory>
#include <optional>
#include <vector>

#include "gui/model/axis.hpp"
#include "gui/model/trace.hpp"

namespace paratwin::gui {

// One trace shown in the timeline, shifted so that it starts at time 0 (or by `offset_s`, e.g. to
// line a measured step up with the predicted iteration).
struct TimelineSection {
  QString title;  // "predicted (analytic)", "simulated (SimGrid)", "measured (live run)"
  std::shared_ptr<const Trace> trace;
  std::optional<double> offset_s = {};  // added to the trace's times; default: -trace.begin_s
};

struct TimelineRow {
  int section = 0;
  int lane = 0;  // index into the section's trace lanes
  double top = 0, height = 0;
  QString process;  // set on the first lane of each process, empty below it
  QString thread;
};

struct TimelineItem {
  QRectF rect;
  SpanKind kind = SpanKind::Other;
  int span = -1;   // index into the lane's spans; -1 for a bucket of several
  int merged = 1;  // spans drawn as this one rectangle
};

struct TimelineHit {
  int row = 0;
  int span = 0;
};

struct TimelineMetrics {
  double ruler = 28;           // height of the time ruler at the top
  double section_header = 24;  // height of each section's title band
  double lane = 22;            // height of one lane
  double min_item_px = 3;      // narrower spans are merged into buckets this wide
};

class TimelineLayout {
 public:
  explicit TimelineLayout(TimelineMetrics metrics = {});

  void set_sections(std::vector<TimelineSection> sections);
  const std::vector<TimelineSection>& sections() const { return sections_; }
  const std::vector<TimelineRow>& rows() const { return rows_; }
  const TimelineMetrics& metrics() const { return metrics_; }

  // Section title bands: (section, top).
  const std::vector<std::pair<int, double>>& headers() const { return headers_; }
  double content_height() const { return height_; }
  // The time the sections cover, after their offsets (each starts at 0 unless offset otherwise).
  double begin_s() const { return begin_; }
  double end_s() const { return end_; }
  double duration_s() const { return end_ - begin_; }
  size_t task_count() const;

  // Offset added to a section's trace times.
  double offset(int section) const;
  const Span& span(const TimelineRow& row, int index) const;
  const Lane& lane(const TimelineRow& row) const;

  // The rectangles to paint for one row at this zoom, left to right, clipped to the axis.
  std::vector<TimelineItem> items(const TimelineRow& row, const TimeAxis& axis) const;
  // The span under a point (content coordinates), within a few pixels.
  std::optional<TimelineHit> hit(double x, double y, const TimeAxis& axis) const;

 private:
  TimelineMetrics metrics_;
  std::vector<TimelineSection> sections_;
  std::vector<TimelineRow> rows_;
  std::vector<std::pair<int, double>> headers_;
  double height_ = 0, begin_ = 0, end_ = 0;
};

// Hover text of a span: name, kind, start, duration and its arguments.
QString describe_span(const Span& span, double offset_s);

}  // namespace paratwin::gui
