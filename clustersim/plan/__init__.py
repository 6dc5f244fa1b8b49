"""One training step as a plan: the scenario lowered into per-stage work, collectives and schedules."""
