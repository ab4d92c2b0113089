"""The trainers' command lines: a flag per hyperparameter, its docstring as the help."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from specialists.lm_recipe import RecipeArgs, add_arguments, from_arguments


@dataclass
class _Args(RecipeArgs):
    projects: tuple[str, ...] = ("a", "b")
    """Projects to read."""
    files: list[str] = field(default_factory=list)
    stdlib: bool = True
    """Add the standard library."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser, _Args)
    return parser


def test_help_shows_each_fields_docstring_and_default(capsys) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Projects to read. (default: a,b)" in out
    assert "Peak learning rate; linear warm-up, then cosine decay over the time budget. (default: 0.001)" in out
    assert "--stdlib, --no-stdlib Add the standard library." in out


def test_values_parse_into_the_dataclass() -> None:
    args = from_arguments(_Args, _parser().parse_args(["--projects", "x,y", "z", "--files", "f.py",
                                                       "--no-stdlib", "--minutes", "1.5"]))
    assert args.projects == ("x", "y", "z") and args.files == ["f.py"]
    assert args.stdlib is False and args.minutes == 1.5 and args.n_layer == RecipeArgs().n_layer
    assert from_arguments(_Args, _parser().parse_args([])) == _Args()
