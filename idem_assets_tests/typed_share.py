"""Read ``basedpyright --verifytypes --outputjson`` from stdin; fail below a known-type share.

``make lint`` runs it: ``python -m idem_assets_tests.typed_share 0.90``. It prints the score
and the public names whose types a checker cannot know, most affected module first.
"""

from __future__ import annotations

import collections
import json
import sys


def main(argv: list[str]) -> int:
    wanted = float(argv[0]) if argv else 0.9
    report = json.load(sys.stdin)
    completeness = report["typeCompleteness"]
    score = float(completeness["completenessScore"])
    counts = completeness["exportedSymbolCounts"]
    unknown = collections.Counter(
        symbol["name"].rsplit(".", 1)[0]
        for symbol in completeness["symbols"]
        if symbol["isExported"] and not symbol["isTypeKnown"]
    )
    print(
        f"public API types: {score:.1%} known ({counts['withKnownType']} known, "
        f"{counts['withAmbiguousType']} ambiguous, {counts['withUnknownType']} unknown); "
        f"wanted at least {wanted:.0%}"
    )
    if score < wanted:
        for module, number in unknown.most_common(10):
            print(f"  {number:4d} not fully known in {module}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
