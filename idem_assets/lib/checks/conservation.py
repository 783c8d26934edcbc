"""Conservation: every raw landing row is loaded, dropped as a duplicate, quarantined, or left
out because it holds an erased key."""

import dagster as dg

CONSERVATION = "conservation"


def conservation_result(
    label: str,
    raw: int,
    loaded: int,
    duplicates: int,
    quarantined: int,
    expected_loaded: int,
    erased: int = 0,
) -> dg.AssetCheckResult:
    """raw rows == loaded + duplicates dropped + quarantined + erased, and every kept row is
    stored."""
    unaccounted = raw - (loaded + duplicates + quarantined + erased)
    return dg.AssetCheckResult(
        check_name=CONSERVATION,
        passed=unaccounted == 0 and loaded == expected_loaded,
        metadata={
            "partition_range": label,
            "raw_rows": raw,
            "loaded": loaded,
            "duplicates_dropped": duplicates,
            "quarantined": quarantined,
            "erased": erased,
            "unaccounted": unaccounted,
            "expected_loaded": expected_loaded,
        },
    )
