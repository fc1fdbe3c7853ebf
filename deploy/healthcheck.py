"""The image's HEALTHCHECK: exit 0 when this container's leaseq answers GET /readyz with 200.

Ready means the database answers, the schema is at head and boot recovery is
done. Standard library only (the slim image has no curl).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 4.0


def main() -> int:
    port = os.environ.get("LEASEQ_PORT") or "8000"
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"{url}: {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
