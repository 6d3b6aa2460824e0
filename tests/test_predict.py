"""lab/predict.py: reveal tells a blank, right or wrong prediction apart and never raises."""

from __future__ import annotations

from resumable_core import lab


def test_a_right_prediction_is_confirmed(capsys):
    """A guess equal to the outcome prints "Right" with the reason and returns True."""
    assert lab.reveal(2, 2, why="rerun sends it again.") is True
    assert capsys.readouterr().out == "Right: 2.\nrerun sends it again.\n"


def test_a_list_predicts_a_tuple_of_the_same_items(capsys):
    """[1, 1] is right against (1, 1), nested too; [1, 2] is still wrong."""
    assert lab.reveal([1, 1], (1, 1), why="two sends.") is True
    assert lab.reveal([[1], 2], ((1,), 2), why="nested.") is True
    assert lab.reveal([1, 2], (1, 1), why="two sends.") is False


def test_a_wrong_prediction_names_both_values_and_the_hint(capsys):
    """A wrong guess shows what was predicted, what happened, why, and the hint."""
    assert lab.reveal(1, 2, why="rerun sends it again.", hint="look at save point B") is False
    out = capsys.readouterr().out
    assert out == "You predicted 1; it is 2.\nrerun sends it again.\nHint: look at save point B\n"


def test_a_blank_prediction_gets_the_answer(capsys):
    """None, ... and an empty string count as no prediction: the answer and reason are printed."""
    for blank in (None, ..., "  "):
        assert lab.reveal(blank, "killed", why="SIGKILL.", hint="unused") is False
        assert capsys.readouterr().out == "No prediction written: it is 'killed'.\nSIGKILL.\n"


def test_text_is_compared_without_case_or_blanks(capsys):
    """A typed answer matches regardless of case and surrounding spaces."""
    assert lab.reveal(" Killed ", "killed", why="w") is True
    assert lab.reveal("True", True, why="w") is False  # text is not a bool
    capsys.readouterr()


def test_an_object_that_fails_to_compare_counts_as_wrong(capsys):
    """A guess whose == raises is reported as wrong, not as an error."""

    class Odd:
        def __eq__(self, other):
            raise RuntimeError("no")

        def __repr__(self):
            return "Odd()"

    assert lab.reveal(Odd(), 3, why="w") is False
    assert capsys.readouterr().out.startswith("You predicted Odd(); it is 3.")


def test_output_goes_to_stdout_only(capsys):
    """reveal writes nothing on stderr (a lesson must keep stderr clean)."""
    lab.reveal(1, 2, why="w", hint="h")
    assert capsys.readouterr().err == ""
