"""Adapters: llm-gym environments handed to other stacks, the outbound twin of `llm_gym.bridges`.

A bridge brings another library's envs in as llm-gym ids; an adapter takes llm-gym ids out, in the
form another trainer or eval harness consumes. Each adapter is its own module, imported on its own
(this package imports none of them, and `import llm_gym` never imports this package), and each
imports its optional dependencies (`datasets`, `verifiers`, `openenv-core`, `tinker`) only when it
is imported or called, never torch:

- `llm_gym.adapters.trl`: TRL `GRPOTrainer` prompt datasets, env-graded reward functions, and an
  `environment_factory` environment for multi-turn envs.
- `llm_gym.adapters.tinker`: glue between llm-gym's seed API and the Tinker cookbook's rollout
  code (`tinker.ModelInput` conversion, cookbook-facing env/group wrappers, policy wrappers).
- `llm_gym.adapters.datasets_export`: `export_dataset(...)` and the `llm-gym export` command.
- `llm_gym.adapters.verifiers`: llm-gym envs as verifiers 0.4 environments (taskset id
  `llm-gym-verifiers`; `evaluate(...)` runs verifiers' own eval against any OpenAI-compatible server).
- `llm_gym.adapters.openenv`: llm-gym envs as OpenEnv environments (`LLMGymEnvironment`,
  `create_app`, `serve`, `LLMGymEnvClient`).
"""
