// The API authorization policy: which identities (client certificate names or token names) may
// insert into which tables, may run Query, and may ask for which ack modes. Deny by default:
// an identity without a section, or a table no `insert` line names, is refused.
// Immutable after Parse; safe to share between threads.
//
// File format (UTF-8 text):
//   # comment (also after a value, following a blank; a # inside a quoted name is the name's)
//   [spiffe://cluster.local/ns/shop/sa/orders]   a section per identity (the text between [ ])
//   insert = shop.orders, shop.order_items        tables as database.table; repeatable
//   insert = logs.*                               every table of database `logs` (a star is a
//                                                 wildcard only unquoted: `*`.x is database *)
//   query = false                                 may call Query (default false)
//   ack = committed                               ack modes it may ask for (default: all)
// Names in `insert` follow the rules of InsertRequest.table (backticks quote a name); `*` alone
// means every table. Separators in lists are commas or spaces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chgate::auth {

// What one identity may do.
struct Grant {
  // A star is a wildcard only unquoted: `*` (every table of every database) and db.* (every
  // table of db). A quoted `*` is a name like any other.
  struct TablePattern {
    std::string database;
    std::string table;
    bool any_database = false;  // `*`: every table of every database
    bool any_table = false;     // db.*: every table of `database`
  };
  std::vector<TablePattern> insert;
  bool query = false;
  std::vector<std::string> ack_modes = {"committed", "accepted", "persisted"};

  // Whether `database`.`table` (unquoted names) matches an `insert` pattern.
  bool MayInsert(absl::string_view database, absl::string_view table) const;
  // Whether `mode` ("committed", "accepted", "persisted") is allowed.
  bool MayAck(absl::string_view mode) const;
};

class Policy {
 public:
  // Parses the file text. Returns InvalidArgument naming the line for syntax errors, unknown
  // keys or ack modes, tables without a database, keys outside a section and duplicate sections.
  static absl::StatusOr<Policy> Parse(absl::string_view text);

  // The grant of `identity`, or null when the policy does not name it.
  const Grant* Find(absl::string_view identity) const;

  size_t size() const { return grants_.size(); }

 private:
  absl::flat_hash_map<std::string, Grant> grants_;
};

}  // namespace chgate::auth
