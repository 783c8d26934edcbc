"""The TPC-H domain: tpchgen-cli data laid out as landing files, declared only in YAML."""
