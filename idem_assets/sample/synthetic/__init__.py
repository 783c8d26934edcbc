"""Seeded simulations of each landing source, producing planned files and defect counts."""
