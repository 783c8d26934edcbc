"""The benchmark commands the docs name for their figures."""
