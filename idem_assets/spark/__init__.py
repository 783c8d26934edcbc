"""The Spark engine: the lake's transforms and writes on Spark, committed by delta-rs."""
