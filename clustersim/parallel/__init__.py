"""How the job is split: the layout (degrees), rank placement and pipeline schedules."""
