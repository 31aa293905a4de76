"""Games family: multi-turn text games (`llm/GuessNumber-v0`, `llm/TicTacToe-v0`)."""
