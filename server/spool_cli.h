// `chgate spool ...`: the operator's commands for the spool's dead letters (batches ClickHouse
// refused for good, kept in <spool-dir>/dead-letter/):
//
//   chgate spool list     [--spool-dir=DIR]
//   chgate spool show     FILE [--format=tsv|jsonl] [--spool-dir=DIR]
//   chgate spool reinsert FILE [--into=DATABASE.TABLE] [--keep] [chgate's ClickHouse options]
//   chgate spool delete   FILE [--spool-dir=DIR]
//   chgate spool wait-drained [--timeout=30s]
//
// FILE is a path, or a file name in <spool-dir>/dead-letter/. `reinsert` sends the batch's rows as
// one INSERT (into its own table, or --into) under the batch's own identity, so running it twice
// on a Replicated table inserts once, then deletes the file unless --keep. Every other option,
// and the CHGATE_* variables, are chgate's own (--spool-dir, --endpoints, --user,
// --password-file, --clickhouse-tls...). Safe to run beside a serving chgate: it reads and
// deletes dead-letter files only, never the spool's segments. `wait-drained` asks the serving
// chgate's /metrics (127.0.0.1 at --metrics-listen's port) until its spool holds nothing pending:
// a preStop hook, so a pod is not deleted while its emptyDir spool still holds acknowledged rows.
#pragma once

#include <ostream>

namespace chgate {

// argv[0] is the program, argv[1] "spool". Returns the exit code: 0 done, 1 the command failed
// (the message is on `err`), 2 a usage error.
int RunSpoolCommand(int argc, const char* const* argv, const char* const* envp, std::ostream& out,
                    std::ostream& err);

}  // namespace chgate
