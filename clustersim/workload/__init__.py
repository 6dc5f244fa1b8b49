"""What is trained: the model (ModelSpec), its presets, and its per-layer cost."""
