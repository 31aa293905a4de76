"""The games family's registered ids (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS = [{'id': 'llm/GuessNumber-v0',
  'source': 'envs_catalog.games.guess_number:GuessNumberSource',
  'kwargs': {'max_number': 20, 'max_turns': 8}},
 {'id': 'llm/TicTacToe-v0',
  'source': 'envs_catalog.games.tictactoe:TicTacToeSource',
  'kwargs': {'opponent': 'random', 'agent_first': 'random'}}]
