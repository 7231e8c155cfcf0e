// Topology painting.
#include "gui/views/topology_view.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QLinearGradient>
#include <QPainter>
#include <QPushButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "gui/model/session.hpp"
#include "gui/views/style.hpp"

namespace paratwin::gui {
namespace {

constexpr double kMargin = 30, kLegend = 64;
// Nodes per pool drawn for a scenario of several jobs, so that every job's nodes show.
constexpr int kMostJobNodesDrawn = 32;

// A job's colour (Tableau 10, as the charts), and the colour of links that several jobs share.
QColor job_color(int job) {
  static const QColor palette[] = {
      {0x4e, 0x79, 0xa7}, {0xf2, 0x8e, 0x2b}, {0x59, 0xa1, 0x4f}, {0xb0, 0x7a, 0xa1}, {0x76, 0xb7, 0xb2},
      {0xed, 0xc9, 0x48}, {0x9c, 0x75, 0x5f}, {0xff, 0x9d, 0xa7}, {0xba, 0xb0, 0xac}, {0x24, 0x29, 0x2f}};
  return palette[size_t(job) % std::size(palette)];
}

QPointF link_start(const Topology& t, const TopologyLink& l) {
  const QRectF& r = t.boxes[size_t(l.from)].rect;
  return {r.center().x(), r.bottom()};
}

// Into a bar (a node's NVSwitch) a link goes straight down; into a switch, to its centre.
QPointF link_end(const Topology& t, const TopologyLink& l) {
  const TopologyBox& to = t.boxes[size_t(l.to)];
  const double x = to.kind == TopologyBox::Kind::Fabric
                       ? std::clamp(link_start(t, l).x(), to.rect.left(), to.rect.right())
                       : to.rect.center().x();
  return {x, to.rect.top()};
}

QString load_text(const LinkLoad& l) {
  return QString("mean %1 GB/s of %2 GB/s (%3%), peak %4 GB/s")
      .arg(l.mean_GBps, 0, 'f', 2)
      .arg(l.capacity_GBps, 0, 'f', 1)
      .arg(100 * l.utilization, 0, 'f', 1)
      .arg(l.peak_GBps, 0, 'f', 2);
}

}  // namespace

TopologyCanvas::TopologyCanvas(QWidget* parent) : QWidget(parent) {
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
  setMouseTracking(true);
}

void TopologyCanvas::set_by_peak(bool by_peak) {
  by_peak_ = by_peak;
  update();
}

double TopologyCanvas::utilization(const LinkLoad& l) const {
  return by_peak_ ? (l.capacity_GBps > 0 ? l.peak_GBps / l.capacity_GBps : 0) : l.utilization;
}

void TopologyCanvas::set_topology(Topology topology) {
  topology_ = std::move(topology);
  update();
}

QTransform TopologyCanvas::transform() const {
  const QSizeF size = topology_.size;
  if (size.width() <= 0 || size.height() <= 0) return {};
  const double sx = (width() - 2 * kMargin) / size.width(),
               sy = (height() - 2 * kMargin - kLegend) / size.height();
  const double s = std::min({sx, sy, 1.6});
  const double dx = (width() - size.width() * s) / 2, dy = kMargin + kLegend;
  return QTransform(s, 0, 0, s, dx, dy);
}

void TopologyCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  if (topology_.boxes.empty()) {
    draw_placeholder(p, rect(), "Open a valid scenario to see its cluster.");
    return;
  }
  // Caption and legend.
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.setPen(colors::kText);
  p.drawText(QRectF(20, 8, width() - 40, 20), Qt::AlignLeft | Qt::AlignVCenter,
             QFontMetricsF(bold).elidedText(topology_.caption, Qt::ElideRight, width() - 40));
  p.setFont(font());
  if (!topology_.job_names.empty()) {
    paint_by_job(p);
    return;
  }
  p.setPen(colors::kMuted);
  const QString what = by_peak_ ? "peak link utilization" : "mean link utilization over the iteration";
  p.drawText(QPointF(20, 46), "0%");
  QLinearGradient gradient(QPointF(44, 0), QPointF(244, 0));
  for (double u : {0.0, 0.25, 0.5, 0.75, 1.0}) gradient.setColorAt(u, utilization_color(u));
  p.setPen(Qt::NoPen);
  p.setBrush(gradient);
  p.drawRoundedRect(QRectF(44, 36, 200, 12), 3, 3);
  p.setPen(colors::kMuted);
  p.drawText(QPointF(252, 46), "100%  " + what);
  const double x = 252 + QFontMetricsF(font()).horizontalAdvance("100%  " + what) + 30;
  p.setPen(QPen(unsampled_color(), 2, Qt::DashLine));
  p.drawLine(QPointF(x, 42), QPointF(x + 30, 42));
  p.setPen(colors::kMuted);
  p.drawText(QPointF(x + 36, 46), "not watched by the simulation (or not simulated yet)");

  draw_picture(p, [this](const TopologyLink& l, double width) {
    if (l.load)
      return QPen(utilization_color(utilization(*l.load)), 3.2 * width, Qt::SolidLine, Qt::RoundCap);
    return QPen(unsampled_color(), 1.6 * width, l.name.isEmpty() ? Qt::DotLine : Qt::DashLine);
  });
}

void TopologyCanvas::draw_picture(QPainter& p,
                                  const std::function<QPen(const TopologyLink&, double)>& pen) const {
  const QTransform tf = transform();
  p.save();
  p.setTransform(tf);
  const double scale = tf.m11();
  // Node frames, then the links, then what the links connect.
  for (const TopologyBox& b : topology_.boxes)
    if (b.kind == TopologyBox::Kind::Node) draw_box(p, b, scale);
  for (const TopologyLink& l : topology_.links) {
    p.setPen(pen(l, 1 / std::sqrt(scale)));
    p.drawLine(link_start(topology_, l), link_end(topology_, l));
  }
  for (const TopologyBox& b : topology_.boxes)
    if (b.kind != TopologyBox::Kind::Node) draw_box(p, b, scale);
  p.restore();
}

// Several jobs: a legend of job colours, each link in its job's colour, shared links red and dashed.
void TopologyCanvas::paint_by_job(QPainter& p) const {
  std::vector<std::pair<QColor, QString>> legend;
  for (size_t j = 0; j < topology_.job_names.size(); ++j)
    legend.push_back({job_color(int(j)), "job " + topology_.job_names[j]});
  legend.push_back({colors::kBad, "shared by several jobs"});
  draw_legend(p, 20, 36, legend);
  draw_picture(p, [](const TopologyLink& l, double width) {
    if (l.jobs.size() > 1) return QPen(colors::kBad, 3.6 * width, Qt::DashLine, Qt::RoundCap);
    if (l.jobs.size() == 1) return QPen(job_color(l.jobs.front()), 3.2 * width, Qt::SolidLine, Qt::RoundCap);
    return QPen(unsampled_color(), 1.6 * width, l.name.isEmpty() ? Qt::DotLine : Qt::DashLine);
  });
}

void TopologyCanvas::draw_box(QPainter& p, const TopologyBox& b, double scale) const {
  QColor fill, border = QColor(0x8c, 0x95, 0x9f), text = colors::kText;
  Qt::Alignment align = Qt::AlignCenter;
  switch (b.kind) {
    case TopologyBox::Kind::Node:
      fill = QColor(0xf6, 0xf8, 0xfa);
      align = Qt::AlignTop | Qt::AlignLeft;
      break;
    case TopologyBox::Kind::Gpu:
      fill = QColor(0x4e, 0x79, 0xa7);
      border = fill.darker(120);
      text = Qt::white;
      break;
    case TopologyBox::Kind::Fabric:
      fill = QColor(0x76, 0xb7, 0xb2);
      border = fill.darker(120);
      text = Qt::white;
      break;
    case TopologyBox::Kind::Nic:
      fill = QColor(0xf2, 0x8e, 0x2b);
      border = fill.darker(120);
      text = Qt::white;
      break;
    case TopologyBox::Kind::Switch:
      fill = QColor(0x59, 0x5f, 0x69);
      border = fill.darker(120);
      text = Qt::white;
      break;
    case TopologyBox::Kind::Core:
      fill = QColor(0x24, 0x29, 0x2f);
      border = fill;
      text = Qt::white;
      break;
    case TopologyBox::Kind::More:
      fill = Qt::white;
      border = colors::kMuted;
      text = colors::kMuted;
      break;
  }
  p.setPen(QPen(border, 1 / scale, b.kind == TopologyBox::Kind::More ? Qt::DashLine : Qt::SolidLine));
  p.setBrush(fill);
  p.drawRoundedRect(b.rect, 4, 4);
  p.setPen(text);
  QFont f = font();
  f.setPointSizeF(b.kind == TopologyBox::Kind::Node ? 9 : 7.5);
  f.setBold(b.kind == TopologyBox::Kind::Node);
  p.setFont(f);
  p.drawText(b.rect.adjusted(6, 3, -4, -2), align, b.label);
}

QString TopologyCanvas::tooltip_at(QPointF point) const {
  const QTransform inverse = transform().inverted();
  const QPointF q = inverse.map(point);
  const double tolerance = 5 / transform().m11();
  for (auto it = topology_.boxes.rbegin(); it != topology_.boxes.rend(); ++it)
    if (it->kind != TopologyBox::Kind::Node && it->rect.contains(q)) return it->tooltip;
  for (const TopologyLink& l : topology_.links) {
    const QPointF a = link_start(topology_, l), b = link_end(topology_, l);
    const QPointF ab = b - a, aq = q - a;
    const double len2 = QPointF::dotProduct(ab, ab);
    const double f = len2 > 0 ? std::clamp(QPointF::dotProduct(aq, ab) / len2, 0.0, 1.0) : 0;
    const QPointF d = a + f * ab - q;
    if (std::hypot(d.x(), d.y()) <= tolerance)
      if (!topology_.job_names.empty()) {
        QStringList names;
        for (int j : l.jobs) names << topology_.job_names[size_t(j)];
        return l.tooltip + (names.isEmpty() ? "\nno job" : "\njobs: " + names.join(", "));
      }
    return l.tooltip + (l.load             ? "\n" + load_text(*l.load)
                        : l.name.isEmpty() ? ""
                                           : "\nnot watched by the simulation");
  }
  for (const TopologyBox& b : topology_.boxes)
    if (b.rect.contains(q)) return b.label + "\n" + b.tooltip;
  return {};
}

bool TopologyCanvas::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = tooltip_at(help->pos());
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(event);
}

TopologyView::TopologyView(Session& session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      canvas_(new TopologyCanvas),
      status_(new QLabel),
      colour_by_(new QComboBox),
      simulate_(new QPushButton("Simulate to colour the links")) {
  status_->setProperty("role", "muted");
  status_->setWordWrap(true);
  colour_by_->addItems({"colour by mean utilization", "colour by peak utilization"});
  connect(colour_by_, &QComboBox::currentIndexChanged, this, [this](int i) { canvas_->set_by_peak(i == 1); });
  auto* bar = new QHBoxLayout;
  bar->addWidget(status_, 1);
  bar->addWidget(colour_by_);
  bar->addWidget(simulate_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(canvas_, 1);
  connect(simulate_, &QPushButton::clicked, this, [this] { session_.simulate({}); });
  connect(&session_, &Session::checked, this, &TopologyView::rebuild);
  connect(&session_, &Session::simulation_finished, this, &TopologyView::rebuild);
  connect(&session_, &Session::selection_changed, this, &TopologyView::rebuild);
  rebuild();
}

void TopologyView::rebuild() {
  simulate_->setEnabled(session_.selected_candidate() != nullptr);
  colour_by_->setEnabled(!session_.jobs());  // utilization is a one-job simulation's
  if (const auto& jobs = session_.jobs()) {  // several jobs: every node drawn, links coloured by job
    Topology t = build_topology(jobs->cluster, kMostJobNodesDrawn);
    const int marked = apply_job_placement(t, *jobs);
    status_->setText(QString("%1 jobs on %2 of %3 nodes drawn: %4 links coloured by the job whose nodes they "
                             "serve; uplinks that several jobs share are red and dashed (paratwin simulate "
                             "measures what they cost each job).")
                         .arg(jobs->jobs.size())
                         .arg(t.drawn_nodes)
                         .arg(t.total_nodes)
                         .arg(marked));
    canvas_->set_topology(std::move(t));
    return;
  }
  if (!session_.scenario()) return;  // keep the last picture while the text has errors
  Topology t = build_topology(session_.scenario()->cluster);
  const int coloured = apply_link_loads(t, link_loads(session_.simulation_report()));
  if (coloured)
    status_->setText(QString("Link utilization of the simulated plan (%1): mean over one iteration; %2 links "
                             "watched by the simulator (the uplinks and the first node's NICs and NVLinks). "
                             "Hover a link for its figures.")
                         .arg(session_.simulated_plan())
                         .arg(coloured));
  else
    status_->setText(
        QString("%1 of %2 nodes drawn. Simulate the chosen plan to colour the links by utilization.")
            .arg(t.drawn_nodes)
            .arg(t.total_nodes));
  canvas_->set_topology(std::move(t));
}

}  // namespace paratwin::gui
