import json
import math
import subprocess
import sys
from collections.abc import Callable

from tests.conftest import Run

Gnau = Callable[..., Run]


def test_evaluate_describes_one_hand_from_arguments(gnau: Gnau) -> None:
    run = gnau("evaluate", "3C", "6S", "8H", "4H", "8C")
    assert (run.status, run.out) == (0, "Double-Ox 8  ox 3C(3) 6S(3) 4H  power 8H 8C\n")


def test_evaluate_json_has_the_documented_fields(gnau: Gnau) -> None:
    run = gnau("evaluate", "--json", "KD", "4C", "3S", "AS", "QC")
    (result,) = run.json_lines
    assert run.status == 0
    assert result["category"] == "NGAU_TONKU"
    assert result["value"] is None
    assert result["ox"] == ["4C", "3S", "QC"]
    assert result["power"] == ["KD", "AS"]
    assert result["points"] == [10, 4, 6, 1, 10]
    assert result["cards"] == ["KD", "4C", "3S", "AS", "QC"]


def test_evaluate_reads_stdin_and_reports_bad_lines_by_number(gnau: Gnau) -> None:
    stdin = "KD JH TS JD QC\nKD JH XX JD QC\n\n4D 4C 3S 8D\nAS AS 2C 3C 4C\n4D 4C 3S 8D 5D\n"
    run = gnau("evaluate", "--json", stdin=stdin)
    lines = run.json_lines
    assert run.status == 1
    assert [line.get("category") for line in lines] == ["DOUBLE_OX", None, None, None, "NO_OX"]
    errors = {line["line"]: line["error"] for line in lines if "error" in line}
    assert set(errors) == {2, 4, 5}
    assert "'XX'" in str(errors[2])
    assert "exactly 5 cards, got 4" in str(errors[4])
    assert "AS appears 2 times" in str(errors[5])


def test_evaluate_text_mode_reports_bad_lines_on_stderr(gnau: Gnau) -> None:
    run = gnau("evaluate", "--rule", "ten_is_duke=true", stdin="KD JH TS JD QC\nnot cards\n")
    assert run.status == 1
    assert run.out == "Five Dukes  ox KD TS QC  power JH JD\n"
    assert run.err == "line 2: not a card: 'not' (rank A 2-9 T/10 J Q K, then suit C D H S)\n"


def test_evaluate_all_good_lines_exit_zero(gnau: Gnau) -> None:
    assert gnau("evaluate", stdin="AS 2C 3D 4H 4S\n2C 3C 4C 5C 6C\n").status == 0


def test_a_bad_house_rule_is_a_usage_error(gnau: Gnau) -> None:
    for command in ("evaluate", "settle", "stats"):
        run = gnau(command, "--rule", "tie=sometimes", stdin="")
        assert run.status == 2
        assert "house rule 'tie' must be one of dealer|push|high_card" in run.err
        assert "Traceback" not in run.err


TABLE = {
    "dealer": "KD 4C 3S 8D 5D",
    "players": [
        {"seat": 1, "cards": "3C 6S 8H 4H 8C", "stake": 10},
        {"seat": 2, "cards": "4D 4S 3D 8S 5C", "stake": 7},
    ],
}


def test_settle_prints_each_table_settled(gnau: Gnau) -> None:
    run = gnau("settle", stdin=json.dumps(TABLE) + "\n")
    (table,) = run.json_lines
    assert run.status == 0
    dealer = table["dealer"]
    players = table["players"]
    assert isinstance(dealer, dict) and isinstance(players, list)
    assert (dealer["category"], dealer["value"], dealer["delta"]) == ("SINGLE_OX", 3, -13)
    assert [(p["seat"], p["category"], p["outcome"], p["delta"]) for p in players] == [
        (1, "DOUBLE_OX", "WIN", 20),
        (2, "NO_OX", "LOSE", -7),
    ]


def test_settle_reports_each_bad_line_and_goes_on(gnau: Gnau) -> None:
    bad_lines = [
        "{not json",
        json.dumps([1, 2]),
        json.dumps({"dealer": "KD 4C 3S 8D 5D"}),
        json.dumps({**TABLE, "extra": 1}),
        json.dumps({**TABLE, "players": [{"seat": 1, "cards": "3C 6S 8H 4H 8C", "stake": 1.5}]}),
        json.dumps({**TABLE, "players": [{"seat": 1, "cards": "3C 6S 8H 4H 8C", "stake": 0}]}),
        json.dumps({**TABLE, "players": [{"seat": 1, "cards": "3C 6S 8H 4H 8C"}]}),
        json.dumps({**TABLE, "players": [{"seat": 1, "cards": "KD 6S 8H 4H 8C", "stake": 1}]}),
        json.dumps({**TABLE, "dealer": 5}),
    ]
    stdin = "\n".join([*bad_lines, json.dumps(TABLE)]) + "\n"
    run = gnau("settle", stdin=stdin)
    lines = run.json_lines
    assert run.status == 1
    assert [line.get("line") for line in lines] == [*range(1, 10), None]
    messages = [str(line.get("error")) for line in lines[:-1]]
    for message, expected in zip(
        messages,
        [
            "not JSON",
            "must be a JSON object",
            "needs both 'dealer' and 'players'",
            "unknown key(s): extra",
            "stake must be an integer, got 1.5",
            "positive integer of minor units, got 0",
            "player 1 lacks stake",
            "card KD appears 2 times",
            "dealer must be a string of cards",
        ],
        strict=True,
    ):
        assert expected in message
    assert "dealer" in lines[-1]


def test_settle_applies_house_rules(gnau: Gnau) -> None:
    run = gnau("settle", "--rule", "payout=multiplier", stdin=json.dumps(TABLE))
    players = run.json_lines[0]["players"]
    assert isinstance(players, list)
    assert players[0]["delta"] == 30


def test_stats_json_is_exact_and_timed(gnau: Gnau) -> None:
    run = gnau("stats", "--json")
    stats = json.loads(run.out)
    assert run.status == 0
    assert stats["total"] == math.comb(52, 5)
    assert sum(stats["categories"].values()) == stats["total"]
    assert sum(stats["values"].values()) == stats["total"]
    assert stats["categories"]["FIVE_DUKES"] == math.comb(12, 5)
    assert stats["values"]["FIVE_DUKES"] == math.comb(12, 5)
    assert {"DOUBLE_OX:13", "SINGLE_OX:0", "NO_OX"} <= set(stats["values"])
    assert stats["seconds"] >= 0


def test_stats_text_lists_ranks_and_the_time(gnau: Gnau) -> None:
    run = gnau("stats", "--rule", "decks=2")
    assert run.status == 0
    assert run.out.startswith(f"{math.comb(104, 5):,} hands of 2 deck(s)")
    assert "Double-Ox K" in run.out
    assert "computed in" in run.out


def test_the_console_script_runs_as_installed() -> None:
    gnau = [sys.executable, "-m", "gnau_service.cli.main"]
    done = subprocess.run(
        [*gnau, "evaluate", "--json"],
        input="KD 4C 3S AD QC\nbad\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["nenku"] is True
    assert second["line"] == 2
    assert done.stderr == ""


def test_evaluate_imports_neither_the_service_nor_its_libraries() -> None:
    """``gnau evaluate`` answers one hand without importing grpc, aiohttp, psycopg or the
    server (most of a second), and without building the whole evaluation table."""
    script = (
        "import sys\n"
        "from gnau_service.cli.main import main\n"
        "from gnau_service.rules import evaluation\n"
        "status = main(['evaluate', '3C', '6S', '8H', '4H', '8C'])\n"
        "heavy = [m for m in ('grpc', 'aiohttp', 'psycopg', 'gnau_service.server.process.app',\n"
        "    'gnau_service.store', 'gnau_client') if m in sys.modules]\n"
        "print(status, heavy, len(evaluation._readings_table(False, False, True, True)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.stdout.splitlines() == [
        "Double-Ox 8  ox 3C(3) 6S(3) 4H  power 8H 8C",
        "0 [] 1",
    ], done.stderr
