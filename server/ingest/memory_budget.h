// MemoryBudget: one count of the memory that insert requests hold, from the moment their bytes
// arrive until ClickHouse committed them (or they failed), against one limit (--memory-budget).
//
// Two parts make up the count:
//   requests  what requests hold before their rows join a batch: the received message, its parsed
//             form, the rows converted to columns, and converted rows waiting for room in the
//             buffer. Each request holds a Reservation, taken when it arrives (TryReserve, refused
//             when the budget is full) and resized as it moves on.
//   buffered  rows in batches, including batches being flushed (the Ingestor adds and removes
//             them: AddBuffered, RemoveBuffered).
//
// The Ingestor admits rows into batches only up to a share of the limit (the buffer limit), so
// requests always keep room to arrive and wait while ClickHouse is slow; beyond the whole limit a
// request is refused at once, before anything of it is buffered. Thread-safe (atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace chgate::ingest {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Bytes counted for one request. Move-only; releases its bytes when destroyed.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    Reservation& operator=(Reservation&& other) noexcept {
      if (this != &other) {
        Release();
        budget_ = std::exchange(other.budget_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
      }
      return *this;
    }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }

    uint64_t bytes() const { return bytes_; }
    bool attached() const { return budget_ != nullptr; }

    // Counts `bytes` instead of what was counted so far. Never refused: the memory it describes
    // exists already (a parsed message, converted columns).
    void Resize(uint64_t bytes) {
      if (budget_ == nullptr) return;
      if (bytes >= bytes_) {
        budget_->requests_.fetch_add(bytes - bytes_, std::memory_order_relaxed);
      } else {
        budget_->requests_.fetch_sub(bytes_ - bytes, std::memory_order_relaxed);
      }
      bytes_ = bytes;
    }

    void Release() {
      if (budget_ != nullptr && bytes_ > 0) {
        budget_->requests_.fetch_sub(bytes_, std::memory_order_relaxed);
      }
      bytes_ = 0;
    }

   private:
    friend class MemoryBudget;
    Reservation(MemoryBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    MemoryBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // Reserves `bytes` if they fit beside everything counted now; nullopt when they do not. An
  // empty budget takes any request, so one larger than the limit still makes progress (the
  // largest message is capped well below the limit).
  std::optional<Reservation> TryReserve(uint64_t bytes) {
    uint64_t current = requests_.load(std::memory_order_relaxed);
    while (true) {
      const uint64_t buffered = buffered_.load(std::memory_order_relaxed);
      const uint64_t used = current + buffered;
      if (used > 0 && (used > limit_ || bytes > limit_ - used)) return std::nullopt;
      if (requests_.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed)) {
        return Reservation(this, bytes);
      }
    }
  }

  // A reservation of 0 bytes that can grow (Resize) and is counted from then on.
  Reservation Attach() { return Reservation(this, 0); }

  void AddBuffered(uint64_t bytes) { buffered_.fetch_add(bytes, std::memory_order_relaxed); }
  void RemoveBuffered(uint64_t bytes) { buffered_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t limit() const { return limit_; }
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  uint64_t buffered() const { return buffered_.load(std::memory_order_relaxed); }
  uint64_t used() const { return requests() + buffered(); }
  // Why a request of `bytes` was refused: how the budget is used now, and that a retry after a
  // backoff is safe.
  std::string RefusalMessage(uint64_t bytes) const;

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> buffered_{0};
};

}  // namespace chgate::ingest
