// The optimizer's candidates as a table: plan (degrees, schedule, recompute, ZeRO, offload,
// compression) and results (iteration time, tokens/s, MFU, memory, fits, objective). Display text
// is formatted; Qt::UserRole holds the raw value that sorting uses.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "plan/search/optimizer.hpp"

namespace paratwin::gui {

class CandidateTable : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    Rank,
    Tp,
    Pp,
    Dp,
    Cp,
    Ep,
    MicroBatch,
    Schedule,
    Recompute,
    SequenceParallel,
    Zero,
    Offload,
    Compression,
    IterationTime,
    TokensPerSecond,
    Mfu,
    Memory,
    Fits,
    Objective,
    ColumnCount
  };
  static constexpr int kSortRole = Qt::UserRole;

  explicit CandidateTable(QObject* parent = nullptr);

  // Replaces the rows (best first); `objective_unit` heads the objective column ("s", "$", "J").
  void set_candidates(std::vector<Candidate> candidates, const QString& objective_unit);
  const std::vector<Candidate>& candidates() const { return candidates_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  QVariant value(const Candidate& c, int column) const;  // raw, for sorting
  QString text(const Candidate& c, int row, int column) const;

  std::vector<Candidate> candidates_;
  QString objective_unit_;
};

// One line of a plan for labels and window titles: "tp 2 · pp 1 · dp 16 · mb 4 · 1f1b · selective · ZeRO 1".
QString plan_summary(const Plan& plan);

}  // namespace paratwin::gui
