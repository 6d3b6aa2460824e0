"""Korean text renders in the kit's figures: no Hangul glyph is missing (matplotlib's warning is an error here)."""

from __future__ import annotations

import io
import warnings

import matplotlib
import pytest

from resumable_core.lab import figures, fonts

KOREAN = "허공에 뜬 호출: 저장 지점 A와 B 사이의 정산"
FONT = fonts.hangul_font()
needs_font = pytest.mark.skipif(
    FONT is None,
    reason=f"no font with Hangul installed ({', '.join(fonts.HANGUL_FONTS)}): apt-get install fonts-noto-cjk",
)


def _draw_korean() -> bytes:
    """A figure made the kit's way, with Korean in its title, axis labels, tick labels and a text, saved as PNG."""
    fig = figures._new_figure(4, 3)
    ax = fig.add_subplot()
    ax.bar(["재개", "재시작"], [1, 3])
    ax.set_title(KOREAN)
    ax.set_xlabel("전략 (strategy)")
    ax.set_ylabel("부수 효과 횟수")
    ax.text(0, 2, "멱등성 키 · 영수증 · 펜싱 토큰 · 저널", fontweight="bold")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


@pytest.fixture
def own_rcparams():
    """The test's rcParams changes end with it."""
    with matplotlib.rc_context():
        yield


@pytest.mark.slow
@needs_font
def test_a_figure_with_korean_labels_misses_no_glyph(own_rcparams) -> None:
    """Every Hangul glyph is found: the kit's figures fall back to the installed Hangul font."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph 54728 (\N{HANGUL SYLLABLE HEO}) missing from font(s) DejaVu Sans."
        png = _draw_korean()
    assert png.startswith(b"\x89PNG")
    family = matplotlib.rcParams["font.family"]
    assert family[-1] == FONT and len(family) >= 2, "the current font first, the Hangul font after it"


@needs_font
def test_the_check_fails_without_the_fallback(own_rcparams, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: with no Hangul font in the family, drawing the same figure warns of a missing glyph."""
    monkeypatch.setattr(fonts, "use_hangul_fallback", lambda: None)
    monkeypatch.setattr(figures, "_quiet_pyplot_free_matplotlib", _without_fallback)
    matplotlib.rcParams["font.family"] = ["DejaVu Sans"]
    with warnings.catch_warnings(), pytest.raises(UserWarning, match="missing from font"):
        warnings.simplefilter("error")
        _draw_korean()


def _without_fallback():
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    return Figure, ListedColormap, Patch


@needs_font
def test_the_fallback_is_appended_once(own_rcparams) -> None:
    """Called again (every figure calls it), the family does not grow."""
    matplotlib.rcParams["font.family"] = ["sans-serif"]
    assert fonts.use_hangul_fallback() == FONT
    assert fonts.use_hangul_fallback() == FONT
    assert matplotlib.rcParams["font.family"] == ["sans-serif", FONT]


def test_no_hangul_font_changes_nothing(own_rcparams, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a Hangul font the family is left as it is (and no error)."""
    monkeypatch.setattr(fonts, "hangul_font", lambda: None)
    before = list(matplotlib.rcParams["font.family"])
    assert fonts.use_hangul_fallback() is None
    assert list(matplotlib.rcParams["font.family"]) == before


@pytest.mark.slow
def test_without_a_hangul_font_a_korean_learner_reads_one_line_of_advice(
    own_rcparams, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Hangul font, in Korean: drawing Korean twice warns of no glyph, and one line (from the catalog) says which
    package to install."""
    monkeypatch.setattr(fonts, "hangul_font", lambda: None)
    monkeypatch.setenv("RESUMABLE_LANG", "ko")
    fonts._say_once.cache_clear()
    matplotlib.rcParams["font.family"] = ["DejaVu Sans"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _draw_korean()
        _draw_korean()
    [advice] = capsys.readouterr().out.splitlines()
    assert "fonts-noto-cjk" in advice and "한글" in advice
    fonts._say_once.cache_clear()
