#!/usr/bin/python3
"""`make run` as a newcomer uses it: deploy/run-local.sh serves chgate in the foreground against
the local ClickHouse, prints a banner once chgate answers, and the insert and query it prints work
when pasted as printed; Ctrl-C (SIGINT) then drains chgate, which exits 0 within seconds.

  /usr/bin/python3 tests/e2e/run_local_test.py --chgate build/server/chgate \
      --cli build/client/chgate-cli
"""

import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402

ARGS = None
TABLE = f"chgate_run_test_{os.getpid()}"


class RunLocalTest(unittest.TestCase):
    def test_banner_commands_work_as_printed_and_ctrl_c_exits(self):
        api, health, metrics = e2e.free_ports(3)
        env = dict(os.environ, RUN_LISTEN=f"127.0.0.1:{api}", RUN_HEALTH_LISTEN=f"127.0.0.1:{health}",
                   RUN_METRICS_LISTEN=f"127.0.0.1:{metrics}", RUN_TABLE=TABLE)
        script = e2e.SOURCE_DIR / "deploy/run-local.sh"
        proc = subprocess.Popen([str(script), ARGS.chgate, ARGS.cli], cwd=e2e.SOURCE_DIR, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines, stderr = [], []
        threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()
        try:
            deadline = time.monotonic() + 60
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if "query 'SELECT" in line or time.monotonic() > deadline:
                    break
            banner = "\n".join(lines)
            self.assertIn(f"127.0.0.1:{api}", banner)
            self.assertIn(f"http://127.0.0.1:{metrics}/metrics", banner)
            commands = [l.strip() for l in lines if "chgate-cli" in l and (" insert " in l or " query " in l)]
            self.assertEqual(len(commands), 2, banner)
            # Pasted as printed, from the directory make runs in.
            insert = subprocess.run(["bash", "-c", commands[0]], cwd=e2e.SOURCE_DIR,
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(insert.returncode, 0, insert.stderr)
            query = subprocess.run(["bash", "-c", commands[1]], cwd=e2e.SOURCE_DIR,
                                   capture_output=True, text=True, timeout=60)
            self.assertEqual(query.returncode, 0, query.stderr)
            self.assertEqual(query.stdout, "1\thello\n")
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=30)
            elapsed = time.monotonic() - started
            e2e_report = f"exit {rc} {elapsed:.2f} s after SIGINT"
            print(f"  [e2e] {e2e_report}", file=sys.stderr, flush=True)
            self.assertEqual(rc, 0, "".join(stderr)[-3000:])
            self.assertLess(elapsed, 10, e2e_report)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            subprocess.run([str(e2e.SOURCE_DIR / "deploy/clickhouse/clickhousectl.sh"), "client", "-q",
                            f"DROP TABLE IF EXISTS default.{TABLE}"], check=False)


def main():
    global ARGS

    def add(ap):
        ap.add_argument("--cli", required=True, help="chgate-cli binary")

    ARGS, argv = e2e.test_main_args(__doc__, add)
    ARGS.cli = os.path.abspath(ARGS.cli)
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
