"""Conservation: every raw landing row is loaded, dropped as a duplicate, or quarantined."""

import dagster as dg

CONSERVATION = "conservation"


def conservation_result(
    label: str, raw: int, loaded: int, duplicates: int, quarantined: int, expected_loaded: int
) -> dg.AssetCheckResult:
    """raw rows == loaded + duplicates dropped + quarantined, and every kept row is stored."""
    unaccounted = raw - (loaded + duplicates + quarantined)
    return dg.AssetCheckResult(
        check_name=CONSERVATION,
        passed=unaccounted == 0 and loaded == expected_loaded,
        metadata={
            "partition_range": label,
            "raw_rows": raw,
            "loaded": loaded,
            "duplicates_dropped": duplicates,
            "quarantined": quarantined,
            "unaccounted": unaccounted,
            "expected_loaded": expected_loaded,
        },
    )
