"""Games family: multi-turn text games, one module per game.

- `guess_number`: `llm/GuessNumber-v0`, guess a secret number from "Higher."/"Lower." feedback.
- `tictactoe`: `llm/TicTacToe-v0`, tic-tac-toe against a random or minimax opponent, plus a
  self-play group builder; its rules (`TicTacToeRules`) are the ones every tic-tac-toe id uses.
- `connect_four`: `llm/ConnectFour-v0`, Connect Four against a random, win-or-block or negamax
  opponent.
- `nim`: `llm/Nim-v0`, Nim against a random or optimal (nim-sum) opponent.
- `wordle`: `llm/Wordle-v0`, find a 5-letter word from green/yellow/grey marks.
- `mastermind`: `llm/Mastermind-v0`, find a digit code from black/white peg feedback.
- `twenty_questions`: `llm/TwentyQuestions-v0`, find a hidden object with yes/no questions.

Every env reads a reply through its answer contract (`answer_contract`, under the one answer
policy `llm_gym.grading.POLICY`), then applies the game's rules. Shared pieces: `moves`
(`BoardMove`, the contract of a numbered cell or column, and `read_integer_move`), `_turns`
(`TurnGameEnv`, the one-reply-per-turn loop of Wordle, Mastermind and Twenty Questions) and
`two_player` (the two-player game machinery: the rules protocol, play
against a scripted opponent, self-play groups), which Connect Four, Nim and tic-tac-toe's
self-play are built on and `envs_catalog.multiagent.selfplay` imports (never the reverse). The
registered ids live in `specs` (GuessNumber, TicTacToe), `specs_board` (ConnectFour, Nim) and
`specs_words` (Wordle, Mastermind, TwentyQuestions).
"""
