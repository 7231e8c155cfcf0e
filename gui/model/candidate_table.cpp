// Candidate table model.
#include "gui/model/candidate_table.hpp"

#include <QBrush>
#include <QColor>

#include "gui/model/axis.hpp"

namespace paratwin::gui {
namespace {

QString recompute_of(const Plan& p) {
  return QString::fromStdString(recompute_name(p));
}

QString schedule_of(const Plan& p) {
  QString s = QString::fromStdString(enum_name(p.schedule, kScheduleNames));
  return p.virtual_stages > 1 ? s + QString(" v%1").arg(p.virtual_stages) : s;
}

QString offload_of(const Plan& p) {
  if (p.offload_optimizer && p.offload_activations) return "opt+act";
  return p.offload_optimizer ? "optimizer" : p.offload_activations ? "activations" : "-";
}

QString compression_of(const Plan& p) {
  if (p.compression.kind == CompressionKind::None) return "-";
  return QString("top-k %1%").arg(100 * p.compression.ratio, 0, 'g', 3);
}

}  // namespace

QString plan_summary(const Plan& p) {
  QStringList parts{QString("tp %1").arg(p.tp), QString("pp %1").arg(p.pp), QString("dp %1").arg(p.dp)};
  if (p.cp > 1) parts << QString("cp %1").arg(p.cp);
  if (p.ep > 1) parts << QString("ep %1").arg(p.ep);
  if (folds_experts(p)) parts << QString("expert tp %1").arg(p.expert_tp);
  parts << QString("mb %1 x %2").arg(p.micro_batch).arg(p.num_microbatches) << schedule_of(p)
        << "recompute " + recompute_of(p) << QString("ZeRO %1").arg(p.zero);
  if (p.sequence_parallel) parts << "SP";
  if (p.offload_optimizer || p.offload_activations) parts << "offload " + offload_of(p);
  if (p.compression.kind != CompressionKind::None) parts << compression_of(p);
  return parts.join(" · ");
}

CandidateTable::CandidateTable(QObject* parent) : QAbstractTableModel(parent) {}

void CandidateTable::set_candidates(std::vector<Candidate> candidates, const QString& objective_unit) {
  beginResetModel();
  candidates_ = std::move(candidates);
  objective_unit_ = objective_unit;
  endResetModel();
}

int CandidateTable::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(candidates_.size());
}

int CandidateTable::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant CandidateTable::value(const Candidate& c, int column) const {
  const Plan& p = c.plan;
  const Metrics& m = c.report.metrics;
  switch (column) {
    case Tp:
      return p.tp;
    case Pp:
      return p.pp;
    case Dp:
      return p.dp;
    case Cp:
      return p.cp;
    case Ep:
      return p.ep;
    case MicroBatch:
      return p.micro_batch;
    case Schedule:
      return schedule_of(p);
    case Recompute:
      return recompute_of(p);
    case SequenceParallel:
      return p.sequence_parallel;
    case Zero:
      return p.zero;
    case Offload:
      return offload_of(p);
    case Compression:
      return compression_of(p);
    case IterationTime:
      return m.iteration_time_s;
    case TokensPerSecond:
      return m.tokens_per_s;
    case Mfu:
      return m.mfu;
    case Memory:
      return m.peak_memory_gib;
    case Fits:
      return m.fits;
    case Objective:
      return c.objective;
  }
  return {};
}

QString CandidateTable::text(const Candidate& c, int row, int column) const {
  const Metrics& m = c.report.metrics;
  switch (column) {
    case Rank:
      return QString::number(row + 1);
    case SequenceParallel:
      return c.plan.sequence_parallel ? "yes" : "no";
    case IterationTime:
      return format_time(m.iteration_time_s, m.iteration_time_s / 1000);
    case TokensPerSecond:
      return format_si(m.tokens_per_s, 4);
    case Mfu:
      return QString::number(100 * m.mfu, 'f', 1) + "%";
    case Memory:
      return QString("%1 / %2").arg(m.peak_memory_gib, 0, 'f', 1).arg(m.memory_capacity_gib, 0, 'f', 0);
    case Fits:
      return m.fits ? "yes" : "NO";
    case Objective:
      return QString::number(c.objective, 'g', 5);
  }
  return value(c, column).toString();
}

QVariant CandidateTable::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Candidate& c = candidates_[size_t(index.row())];
  const int column = index.column();
  switch (role) {
    case Qt::DisplayRole:
      return text(c, index.row(), column);
    case kSortRole:
      return column == Rank ? QVariant(index.row()) : value(c, column);
    case Qt::TextAlignmentRole:
      return column >= IterationTime || column <= MicroBatch || column == Zero
                 ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                 : QVariant(Qt::AlignLeft | Qt::AlignVCenter);
    case Qt::ForegroundRole:
      if (column == Fits && !c.report.metrics.fits) return QBrush(QColor(0xc0, 0x39, 0x2b));
      return {};
    case Qt::ToolTipRole:
      return plan_summary(c.plan);
  }
  return {};
}

QVariant CandidateTable::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[ColumnCount] = {"#",    "TP",          "PP",          "DP",        "CP",
                                           "EP",   "micro-batch", "schedule",    "recompute", "SP",
                                           "ZeRO", "offload",     "compression", "iteration", "tokens/s",
                                           "MFU",  "memory GiB",  "fits",        "objective"};
  if (section == Objective && !objective_unit_.isEmpty())
    return QString("objective (%1)").arg(objective_unit_);
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace paratwin::gui
