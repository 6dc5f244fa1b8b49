"""One training step: the event-driven simulation (simpy) and its closed-form twin."""
