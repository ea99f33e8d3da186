// IngestMetricsObserver: the Ingestor's reports (server/ingest/observer.h) as metric series.
#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"

namespace chgate::metrics {

std::string_view FlushReasonLabel(ingest::FlushReason reason) {
  switch (reason) {
    case ingest::FlushReason::kRows:
      return kFlushRows;
    case ingest::FlushReason::kBytes:
      return kFlushBytes;
    case ingest::FlushReason::kAge:
      return kFlushAge;
    case ingest::FlushReason::kDeadline:
      return kFlushDeadline;
    case ingest::FlushReason::kShutdown:
      return kFlushShutdown;
    case ingest::FlushReason::kReplay:
      return kFlushReplay;
  }
  return kFlushRows;
}

void IngestMetricsObserver::Budgets(uint64_t memory_budget_bytes, uint64_t buffer_budget_bytes) {
  m_->memory_budget_bytes->Set(static_cast<double>(memory_budget_bytes));
  m_->SetBufferBudgetBytes(buffer_budget_bytes);
}

void IngestMetricsObserver::TableStarted(const std::string& table, absl::Duration max_delay) {
  m_->TableStarted(table, absl::ToDoubleSeconds(max_delay));
}

void IngestMetricsObserver::RequestDone(const std::string& table, const absl::Status& status,
                                        ingest::AckMode acked, uint64_t rows) {
  std::string_view result = ResultLabel(status.code());
  if (status.ok()) {
    result = acked == ingest::AckMode::kCommitted   ? kResultOk
             : acked == ingest::AckMode::kPersisted ? kResultPersisted
                                                    : kResultAccepted;
  }
  m_->RequestDone(table, result, rows);
}

void IngestMetricsObserver::CommitLatency(const std::string& table, absl::Duration latency) {
  m_->CommitLatency(table, absl::ToDoubleSeconds(latency));
}

void IngestMetricsObserver::MemoryRefused() { m_->memory_refusals->Increment(); }

void IngestMetricsObserver::BatchFlushed(const std::string& table, ingest::FlushReason reason,
                                         uint64_t rows, uint64_t bytes, absl::Duration took) {
  m_->BatchFlushed(table, FlushReasonLabel(reason), rows, bytes, absl::ToDoubleSeconds(took));
}

void IngestMetricsObserver::FlushRetry(const std::string& table) { m_->FlushRetry(table); }

void IngestMetricsObserver::FlushFailed(const std::string& table, const absl::Status& status,
                                        std::optional<int32_t> clickhouse_code) {
  m_->FlushError(table, clickhouse_code.has_value() ? ClickHouseCodeLabel(*clickhouse_code)
                                                    : StatusCodeLabel(status.code()));
}

void IngestMetricsObserver::RowsDropped(const std::string& table, ingest::DropReason reason,
                                        uint64_t rows) {
  const IngestTableMetrics& t = m_->ForTable(table);
  const double n = static_cast<double>(rows);
  switch (reason) {
    case ingest::DropReason::kShutdown:
      return t.rows_dropped_shutdown->Increment(n);
    case ingest::DropReason::kAcceptedFlushFailed:
      return t.rows_dropped_accepted->Increment(n);
    case ingest::DropReason::kSpoolDamaged:
      return t.rows_dropped_spool_damaged->Increment(n);
    case ingest::DropReason::kSpoolDeadLetter:
      return t.spool_dead_letter_rows->Increment(n);
  }
}

void IngestMetricsObserver::SpoolReplayed(uint64_t records) {
  m_->spool_replayed_records->Increment(static_cast<double>(records));
}

void IngestMetricsObserver::DedupWindowCovers(const std::string& table, double seconds) {
  m_->dedup_window->Add({{"table", table}}).Set(seconds);
}

void IngestMetricsObserver::DelayChanged(const std::string& table, absl::Duration delay) {
  m_->batch_max_delay->Add({{"table", table}}).Set(absl::ToDoubleSeconds(delay));
}

void IngestMetricsObserver::Buffered(uint64_t rows, uint64_t bytes) {
  m_->SetBuffered(rows, bytes);
}

void IngestMetricsObserver::WaitingRequests(size_t requests) {
  m_->waiting_requests->Set(static_cast<double>(requests));
}

void IngestMetricsObserver::RequestBytes(uint64_t bytes) {
  m_->memory_request_bytes->Set(static_cast<double>(bytes));
}

}  // namespace chgate::metrics
