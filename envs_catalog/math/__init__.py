"""Math family: procedural arithmetic (`llm/Math-v0`, `llm/MathMulti-v0`)."""
