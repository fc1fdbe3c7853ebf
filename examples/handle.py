"""The example's handler: ``leaseq worker`` runs it once per lead.

The payload arrives as JSON on stdin; LEASEQ_LEAD_ID, LEASEQ_ATTEMPT and
LEASEQ_SESSION are in the environment. Print the result as JSON and exit 0;
exit non-zero to fail the attempt (the lead is retried later while attempts
remain). Lead 97, 194, … fail on their first attempt to show a retry.
"""

import json
import os
import random
import sys
import time


def main() -> int:
    payload = json.load(sys.stdin)
    n = payload["n"]
    attempt = int(os.environ["LEASEQ_ATTEMPT"])
    time.sleep(random.uniform(0.01, 0.05))  # the "work"
    if n % 97 == 0 and attempt == 1:
        print(f"lead {os.environ['LEASEQ_LEAD_ID']}: flaky on purpose", file=sys.stderr)
        return 1
    print(json.dumps({"n": n, "square": n * n, "attempt": attempt}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
