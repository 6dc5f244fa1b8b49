"""The timing models of one training step: the event engine (simpy), its hybrid and its closed-form twin.

Each takes a step plan (clustersim.plan) and answers with a StepResult; clustersim.engine.selector
is the one place that picks one.
"""
