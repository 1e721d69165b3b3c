"""The page's check of a round's disclosed return to player against the service's own reading
(``ReturnToPlayer.from_json``): the same figures accepted, the same ones refused, and the same
rounding, with ``node`` running the page's receipt module."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

from gnau_service.rules.return_to_player import ReturnToPlayer, ReturnToPlayerError
from tests.web.nodejs import run_module_script

RECEIPT_MODULE = Path(__file__).parents[2] / "gnau_service" / "web" / "js" / "receipt.js"
CHECK_ALL = """
import { disclosed } from %s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const verdicts = JSON.parse(input).map((figures) => {
  try {
    return disclosed(figures, "r-1") === null ? "absent" : "ok";
  } catch (error) {
    return error.step === "entries" ? "refused" : `unexpected: ${error}`;
  }
});
process.stdout.write(JSON.stringify(verdicts));
"""


def python_verdict(figures: object) -> str:
    try:
        ReturnToPlayer.from_json(figures)
    except ReturnToPlayerError:
        return "refused"
    return "ok"


def cases(seed: int) -> list[object]:
    rng = random.Random(seed)
    found: list[object] = []
    for _ in range(400):
        # Denominators with ties at the 7th place (powers of 2 and 5) and the sheets' sizes.
        denominator = rng.choice([2 * 10**6, 8, 3_986_646_103_440, rng.randint(1, 10**15)])
        value = Fraction(rng.randint(-2 * denominator, 2 * denominator), denominator)
        figures = ReturnToPlayer(value).to_json()
        found.append(figures)
        broken = dict(figures)
        key = rng.choice(list(broken))
        broken[key] = rng.choice(
            [
                broken[key].replace("/", "//"),
                broken[key] + "0",
                f"{2 * value.numerator}/{2 * value.denominator}",
                str(float(value)),
                None,
            ]
        )
        found.append(broken)
    found += [{**figures, "extra": "1"}, "0.95", None, [], {}]
    return found


def test_the_page_reads_disclosed_figures_as_the_service_does() -> None:
    figures = cases(14)
    script = CHECK_ALL % json.dumps(RECEIPT_MODULE.as_uri())
    verdicts = run_module_script(script, figures)
    expected = [python_verdict(item) for item in figures]
    assert verdicts == expected
    assert expected.count("ok") >= 400 and expected.count("refused") >= 300
