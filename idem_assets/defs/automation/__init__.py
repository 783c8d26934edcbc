"""Jobs, schedules and sensors that drive the daily loads."""
