"""Adapters that feed llm-gym environments to other stacks, imported per adapter so each pulls only
its own optional dependencies:

- `trainers.adapters.trl`: TRL `GRPOTrainer` prompt datasets, env-graded reward functions, and an
  `environment_factory` environment for multi-turn envs.
- `trainers.adapters.tinker`: glue between llm-gym's seed API and the Tinker cookbook's rollout
  code (`tinker.ModelInput` conversion, cookbook-facing env/group wrappers, policy wrappers).
- `trainers.adapters.datasets_export`: `export_dataset(...)` and the `llm-gym export` command.
- `trainers.adapters.verifiers`: llm-gym envs as verifiers 0.4 environments (taskset id
  `llm-gym-verifiers`; `evaluate(...)` runs verifiers' own eval against any OpenAI-compatible server).
- `trainers.adapters.openenv`: llm-gym envs as OpenEnv environments (`LLMGymEnvironment`,
  `create_app`, `serve`, `LLMGymEnvClient`).
"""
