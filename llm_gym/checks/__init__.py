"""Checks an environment must pass, as a library (`llm-gym check` is their command line).

`llm_gym.checks.adversarial` is the generic adversarial audit (second answers, worked steps,
degenerate replies) built from an env's own gold answers.
"""
