// NullServer: a minimal native-protocol server for benchmarks and tests. It speaks revision 54460
// on 127.0.0.1 (port 0), answers Ping, accepts any INSERT (answering with a configured header
// block, then reading and discarding every Data block) and answers any other query by sending
// a configured block a configured number of times. Data blocks are read past without keeping
// their values (fixed-width and String bodies are skipped, other layouts decoded into reused
// columns), so its memory is bounded by its receive buffer and one block of nested values. Each
// connection is served on its own thread; the destructor stops them all. With a TLS context it
// serves TLS, as a server's secure native port does.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/compression/frame.h"

namespace asio::ssl {
class context;
}  // namespace asio::ssl

namespace chgate::clickhouse {

struct NullServerOptions {
  // Returned as the INSERT header (names and types; no rows).
  Block insert_header;
  // Sent `select_repeats` times in answer to a non-INSERT query.
  Block select_block;
  uint64_t select_repeats = 0;
  uint64_t revision = 54460;
  // The port to listen on; 0 picks a free one.
  uint16_t port = 0;
  // Serves TLS with this server context when set (plain TCP otherwise).
  std::shared_ptr<asio::ssl::context> tls;
};

class NullServer {
 public:
  explicit NullServer(NullServerOptions options);
  ~NullServer();
  NullServer(const NullServer&) = delete;
  NullServer& operator=(const NullServer&) = delete;

  // Binds and starts accepting. Errors: Unavailable when the socket cannot be bound.
  absl::Status Start();
  uint16_t port() const { return port_; }

  // Rows and bytes of client Data blocks received (after decompression) so far.
  uint64_t rows_received() const { return rows_received_.load(); }
  uint64_t inserts_completed() const { return inserts_completed_.load(); }

 private:
  void AcceptLoop();
  void Serve(int fd);

  NullServerOptions options_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  std::vector<int> client_fds_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> rows_received_{0};
  std::atomic<uint64_t> inserts_completed_{0};
  // Encoded select block (body only), raw and per compression method, built once.
  std::string select_body_;
};

}  // namespace chgate::clickhouse
