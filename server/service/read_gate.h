// ReadGate: how many Insert messages gRPC pulls in at once.
//
// gRPC receives a message only while chgate has a read pending on its call; otherwise the call's
// HTTP/2 window (64 KiB: BDP probing is off) holds the rest in the client. Insert calls take a
// slot before they start their read and give it back once the message is in (then the memory
// budget counts it), so at most `slots` messages of unknown size, each up to
// --max-message-bytes, are in transit at once, however many callers send at the same moment.
// Calls beyond wait in a FIFO queue holding nothing but their window. Reads end in microseconds
// to milliseconds (the bytes come from the caller, not from ClickHouse), so the queue moves even
// while ClickHouse is down.
//
// Thread-safe. Grants run outside the gate's lock.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace chgate::service {

class ReadGate {
 public:
  explicit ReadGate(size_t slots) : free_(slots) {}
  ReadGate(const ReadGate&) = delete;
  ReadGate& operator=(const ReadGate&) = delete;

  // Takes a slot now (true: `grant` is not called), or queues `grant`, which runs with a slot
  // once one is released (false). A grant returns whether it kept the slot (false: its call
  // ended while it waited; the slot goes to the next one).
  using Grant = std::function<bool()>;
  bool Acquire(Grant grant) {
    absl::MutexLock lock(&mu_);
    if (free_ > 0) {
      --free_;
      return true;
    }
    queue_.push_back(std::move(grant));
    return false;
  }

  // Gives a slot back: to the oldest queued grant that keeps it, which runs on this thread, or
  // to the pool.
  void Release() {
    while (true) {
      Grant next;
      {
        absl::MutexLock lock(&mu_);
        if (queue_.empty()) {
          ++free_;
          return;
        }
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      if (next()) return;
    }
  }

  size_t queued() const {
    absl::MutexLock lock(&mu_);
    return queue_.size();
  }

 private:
  mutable absl::Mutex mu_;
  size_t free_ ABSL_GUARDED_BY(mu_);
  std::deque<Grant> queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chgate::service
