"""Fork 5 attempts from one snapshot and keep the best.

A session is prepared once (files, state); fork() snapshots it and starts
five sessions from the snapshot at once. Each attempt tries another
approach; the best is kept, the rest are deleted with their with-block.

    WARREN_URL=... WARREN_API_KEY=... python3 examples/fork_best_of_five.py
"""

from concurrent.futures import ThreadPoolExecutor
from typing import Tuple

from warren import Session, Warren

SETUP = "def score(n):\n    # the closer to 42 the better\n    return -abs(42 - n)\n"


def attempt(s: Session, i: int) -> Tuple[int, Session]:
    """Attempt i: a different answer in each fork, scored inside it."""
    s.files.write("answer.py", f"ANSWER = {i * 11}\n")
    r = s.exec("python3 -c 'from lib import score; from answer import ANSWER; print(score(ANSWER))'")
    if not r.ok:
        raise RuntimeError(r.stderr)
    return int(r.stdout), s


def main(w: Warren) -> Tuple[int, str]:
    """Returns the best score and the id of the session kept."""
    with w.sessions.create(labels={"example": "fork"}) as base:
        base.files.write("lib.py", SETUP)  # the shared starting point
        forks = base.fork(5)
        try:
            with ThreadPoolExecutor(5) as pool:
                results = list(pool.map(attempt, forks, range(5)))
            best_score, best = max(results, key=lambda r: r[0])
            print("scores:", [r[0] for r in results], "best:", best.id)
            for _, s in results:
                if s is not best:
                    s.delete()
            best.files.read_text("answer.py")  # the winner lives on
            return best_score, best.id
        except BaseException:
            for s in forks:
                s.__exit__(None, None, None)
            raise


if __name__ == "__main__":
    with Warren() as w:
        score, sid = main(w)
        print(f"kept {sid} (score {score}); delete it with: warren session rm {sid}")
