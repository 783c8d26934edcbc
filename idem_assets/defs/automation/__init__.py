"""Jobs and schedules that drive the daily loads (each source brings its own sensor)."""
