"""Small helpers an environment author imports from the cookbook's `tinker_cookbook.utils`:
`logtree` (nested HTML traces of rollouts), `logtree_formatters` (objects that render themselves
into a trace) and `misc_utils` (`safezip`, `dict_mean`, ...). Nothing is imported here, so
`import llm_gym.utils` costs nothing; import the submodule you need."""
