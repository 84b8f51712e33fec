"""The memlab command line. The only module that reads Hydra configs."""

from __future__ import annotations

import sys

from memlab.errors import MemlabError

USAGE = """usage: memlab <command> [args]

commands:
  demo        a short tour of the memory layer (two users, recall under a budget)
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(USAGE)
        return 0
    command = argv[0]
    try:
        if command == "demo":
            from memlab.demo import main as demo

            demo()
            return 0
        print(f"memlab: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    except MemlabError as exc:
        print(f"memlab: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
